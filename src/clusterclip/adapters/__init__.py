"""Consumers of a schedule: training-framework adapters.

``clusterclip.adapters.torch.ClusterClipSampler`` is a ``torch.utils.data.Sampler``
(when torch is installed) that streams the global schedule for one rank and
resumes from ``consumed_samples``. Sub-modules import their framework only
when they are imported themselves; this package imports nothing.
"""
