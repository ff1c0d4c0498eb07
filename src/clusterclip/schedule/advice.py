"""Advice on the repetition cap for the budget at hand, from the measured grid.

In the policy grid of ``docs/results.md`` (two corpora with natural cluster
sizes, 4 passes over the data, paired seeds), a cap ``R`` equal to the number of
passes trained worse than ``R`` = twice the passes on most independent metrics
of both corpora: when the cap is about the whole capacity, every document is
seen ``R`` times and the clip mostly decides *when*, pushing the rare clusters
to the front. The summaries of ``clusterclip schedule`` and ``clusterclip run``
print this advice; nothing is changed for the user.

>>> clip_advice("clusterclip", 4, passes=4.0)
'the budget is 4.0 passes over the usable documents and max_repeats=4: with R below ~2x the passes, training did worse than with R = 2x in the grid of docs/results.md ("Which to pick"); consider --max-repeats 8'
>>> clip_advice("clusterclip", 4, passes=1.0) is None
True
"""

from __future__ import annotations

import math

__all__ = ["clip_advice"]

#: The grid measured one and four passes; the advice is for budgets of several passes.
_MIN_PASSES = 3.0


def clip_advice(policy: str, max_repeats: int | None, *, passes: float) -> str | None:
    """One line of advice when ``max_repeats`` is below twice the passes of the budget.

    Parameters
    ----------
    policy : str
        The schedule's policy; only the clipped policies (``clusterclip``, or any
        with a finite ``max_repeats`` except ``random``) get advice.
    max_repeats : int or None
        The cap ``R`` (``None``: no cap, no advice).
    passes : float
        Draws of the schedule divided by the usable documents.

    Returns
    -------
    str or None
        The advice, or ``None`` when the cap is at least twice the passes, the
        budget is under 3 passes, or the policy is not clipped.
    """
    if policy == "random" or max_repeats is None or not math.isfinite(passes):
        return None
    if passes < _MIN_PASSES or max_repeats >= 2 * passes:
        return None
    suggested = math.ceil(2 * passes)
    return (
        f"the budget is {passes:.1f} passes over the usable documents and "
        f"max_repeats={max_repeats}: with R below ~2x the passes, training did worse than "
        'with R = 2x in the grid of docs/results.md ("Which to pick"); consider '
        f"--max-repeats {suggested}"
    )
