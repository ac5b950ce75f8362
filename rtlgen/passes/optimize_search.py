"""The folding optimizer's search over IIs (:mod:`rtlgen.passes.optimize`): the candidate IIs, and the
bisection for the smallest one whose attempt (a design at that II within the budget) succeeds."""

__all__ = ["candidate_iis", "smallest_fitting", "LOOK_BELOW"]

LOOK_BELOW = 6          # candidate IIs below the bisection's result tried as well (fitting is not monotone)


def candidate_iis(choices):
    """Every II some design can have: the options' cycle counts from the slowest group's fastest option up."""
    floor = max(min(o.cycles for o in options) for options in choices)
    return sorted(c for c in {o.cycles for options in choices for o in options} if c >= floor)


def smallest_fitting(candidates, attempt):
    """(II, attempt(II)) for the smallest candidate II whose attempt succeeds, by bisection (fitting is
    taken as monotone in the II: a larger II allows every option a smaller one does); None if none does.

    The largest is taken as fitting until the bisection shows it is the only one left: attempted last, if
    at all. It is the costliest attempt (the slowest folding streams the most words, which the FIFO sizing
    of its estimate models one by one: 71 M words a frame, 20 s, on a 128x128 super-resolution CNN) and
    need not fit when faster ones do (a slow layer behind a bursty window generator wants a FIFO of
    100,000 words there), so a failure there must not end the search."""
    best = None
    lo, hi = 0, len(candidates) - 2
    while lo <= hi:
        mid = (lo + hi) // 2
        found = attempt(candidates[mid])
        if found is not None:
            best, hi = (candidates[mid], found), mid - 1
        else:
            lo = mid + 1
    if best is None:
        last = attempt(candidates[-1])
        best = None if last is None else (candidates[-1], last)
        return best
    # Not quite monotone (the inserted FIFOs and DWCs follow the widths): a failed probe can hide smaller
    # IIs that fit (CNV-w1a1, issue 43: the bisection ended at 4,800 where 3,200 fits). The few candidates
    # below the one found are tried too, smallest first, and again below each smaller one that fits (the
    # first look below 4,800 found 3,456, the next 3,200).
    while True:
        k = candidates.index(best[0])
        below = next(((ii, found) for ii in candidates[max(0, k - LOOK_BELOW):k]
                      if (found := attempt(ii)) is not None), None)
        if below is None:
            return best
        best = below
