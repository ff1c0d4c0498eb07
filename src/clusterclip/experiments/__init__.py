"""Reproduction harness: does ClusterClip Sampling help a small language model?

``python -m clusterclip.experiments.lm`` (or ``clusterclip experiment lm``)
embeds and clusters a real corpus, splits held-out text per cluster, trains a
byte-level BPE tokenizer and a small GPT-2 under each sampling policy at an
equal token budget, and reports held-out loss on the natural mix, macro over
clusters, on the rarest clusters and per real category.

Modules: :mod:`~clusterclip.experiments.corpora` (named corpora),
:mod:`~clusterclip.experiments.data` (split, near-duplicates, tokenizer,
packing), :mod:`~clusterclip.experiments.model`,
:mod:`~clusterclip.experiments.evaluate`, :mod:`~clusterclip.experiments.plots`
and :mod:`~clusterclip.experiments.lm` (the entry point).
"""
