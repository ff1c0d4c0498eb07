"""Adapters that feed a schedule to trainers: PyTorch, Hugging Face datasets, exports.

- ``clusterclip.adapters.torch``: ``ClusterClipSampler`` (a distributed-aware,
  resumable ``torch.utils.data.Sampler``).
- ``clusterclip.adapters.hf``: ``apply_schedule`` and ``ScheduledIterableDataset``.
- ``clusterclip.adapters.export``: ordered jsonl shards and a Megatron-style
  ``.npy`` sample index.

Each module imports its framework only when used.
"""
