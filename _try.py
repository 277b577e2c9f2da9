import time, torch
torch.set_num_threads(2)
from bench import models
from bench.context import ProbeContext
from bench.store import Cache
from bench import schemas, registry
m = models.load(models.resolve("gemma3-270m"))
ctx = ProbeContext(model=m, seed=0, cache=Cache(), progress=lambda f, msg="": None)
common = dict(eval_texts=16, selection_tokens=1024, doc_tokens=128, pv_tokens=128)
for name, extra in [("activation_stats", {"methods": ["lape","lap","lave","plnd"]}), ("layer_distribution", {"methods":["lape","plnd"]}),
                    ("deactivation", {"full": ["lape"], "diagonal": ["rs"]}),
                    ("steering", {"n_prompts": 4, "targets": ["de","ru"], "max_new_tokens": 12}), ("crosslingual_similarity", {"n_texts": 16})]:
    info = registry.probe(name)
    kw = {**common, **extra}
    if name == "crosslingual_similarity": kw = {"eval_texts": 16, **extra}
    t = time.time()
    f = info.fn(ctx, **kw)
    f = schemas.validate(f, info.schema, info.metrics)
    print(name, round(time.time()-t,1), "s", len(f))
    print(f.attrs["notes"][:4])
    g = f[f["sample"].isna() & f["neuron"].isna()]
    print(g.groupby(["metric"]).value.describe()[["count","mean","min","max"]])
    if name == "deactivation":
        d = f[f.metric=="delta_bpb"].pivot_table(index=["method","set_lang"], columns="language", values="value")
        print(d.round(3))
        print(f[f.metric=="bpb"][["language","value"]])
    if name == "activation_stats":
        print(f[f.metric=="n_selected"].pivot_table(index="method", columns="set_lang", values="value"))
