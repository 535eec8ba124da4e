"""The click command layer of embedtune (installed as ``embedtune.cli``)."""
