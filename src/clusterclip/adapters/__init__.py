"""Consumers of a schedule: training-framework adapters.

- ``clusterclip.adapters.torch.ClusterClipSampler``: a ``torch.utils.data.Sampler``
  (a plain iterable without torch) that streams the global schedule for one rank
  and resumes from ``consumed_samples`` with any world size.
- ``clusterclip.adapters.hf``: Hugging Face ``datasets`` in schedule order.
- ``clusterclip.adapters.export``: ordered jsonl shards and sample indices for
  trainers that read files.
- ``clusterclip.adapters.exporters``: every export layout behind one ``Exporter``
  protocol (settings as ``option()`` fields, ``export(work, out, options) ->
  ExportSummary``), registered in ``EXPORTERS`` for ``clusterclip export``.
- ``clusterclip.adapters.folders``: the ClusterClip authors' layout, one folder
  of jsonl files per cluster.
- ``clusterclip.adapters.ranks``: the one rule by which the sampler and the
  streaming dataset split the schedule over ranks (equal counts; ``drop_last``
  truncates or pads from the schedule's start).

All of them read the work directory through :class:`clusterclip.io.WorkDir`.

Each sub-module imports its framework only when it is imported itself; this
package imports nothing.
"""
