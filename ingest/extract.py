"""The extraction boundary: extractors propose raw candidates; the pipeline validates them.

An extractor turns one recorded :class:`~sgam.graph.models.Episode` into raw candidate writes:
plain dicts with the fields of a :class:`~sgam.graph.models.MemoryDelta` (``subject``,
``attribute``, ``value``, ``op``, optional ``valid_from``, ``subject_type``, ``confidence`` ...).
Nothing an extractor returns is trusted: the pipeline fills in what the episode implies
(tenant, source episode, speaker, time), validates the result against the models and the schema,
and sends what fails to the quarantine with the reason. SGAM, not the extractor, decides what a
candidate replaces (``reconcile``).

An extractor that produced something it cannot map to a delta (e.g. a relation type the schema
does not know) returns it as a *refused* candidate, ``{REFUSED_KEY: reason, ...its output}``: the
pipeline quarantines it with that reason instead of dropping it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from sgam.graph.models import Episode

RawCandidate = dict[str, Any]
REFUSED_KEY = "refused"
"""The key of a refused candidate's reason (see the module docstring)."""
CurrentState = Mapping[tuple[str, str], Any]
"""The stored current value per (subject, attribute), passed in so an extractor can compare."""


class Extractor(Protocol):
    """Anything that proposes candidate writes for an episode."""

    name: str

    def extract(self, episode: Episode, current: CurrentState) -> Sequence[RawCandidate]:
        """Raw candidates for ``episode``; raise :class:`~sgam.graph.errors.ExtractionError` on failure.

        ``ExtractionError.transient`` tells a worker whether retrying later may help.
        """
        ...


def implied_fields(episode: Episode) -> dict[str, Any]:
    """What a candidate inherits from its episode unless it says otherwise."""
    return {
        "tenant_id": episode.tenant_id,
        "source_episode_id": episode.id,
        "valid_from": episode.occurred_at,
        "asserted_by": episode.actor,
    }
