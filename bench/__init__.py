"""bench: verify published claims about language-model internals, on the models you choose."""

__version__ = "0.1.0"
