"""Helpers that know nothing of attention, tasks or reports: typed options, the name registry, atomic files,
provenance and statistics. The bottom layer: `variants`, `experiments` and `analysis` import it; it imports none
of them."""
