"""A search's missing stage traces, compiled up front under their own progress bar.

Compiling a stage trace takes ~0.3-20 s (DeepSeek-V3's MLA + MoE stages the most); a layout task that
compiles its traces moves a layout bar by one only when it is done, so a search whose first layouts
compile many traces showed nothing for minutes. In-process (serial) searches therefore compile the
missing traces first, one bar step per trace ("stage traces"), and the layout tasks then find them in
the memory cache. The traces are the ones the tasks would compile: results are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from simcast.serving.config import ServingConfig
from simcast.trace.key import StageKey


def missing_keys(cfgs: Sequence[ServingConfig], use_disk_cache: bool = True) -> list[StageKey]:
    """The stage-trace keys of ``cfgs`` not yet cached (memory, disk or shipped), in a stable order. The
    partition ``balanced`` is taken as ``vllm``: its keys are known only after a fit."""
    from simcast.sim.simulate import stage_keys
    from simcast.trace.cache import is_cached

    keys: dict[StageKey, None] = {}
    for c in cfgs:
        part = "vllm" if c.partition.is_balanced else c.partition.text
        try:
            keys.update(dict.fromkeys(stage_keys(c.model, c.parallel, part)))
        except ValueError:  # an illegal split (SimcastInputError): its task rejects it
            pass
    return [k for k in keys if not (use_disk_cache and is_cached(k))]


def _compile(task: tuple[StageKey, bool]) -> None:
    from simcast.trace.cache import get_trace

    key, use_disk_cache = task
    get_trace(key, use_disk_cache)


def warm_traces(cfgs: Sequence[ServingConfig], use_disk_cache: bool, progress: bool | None) -> None:
    """Compile ``cfgs``' missing stage traces in this process under a "stage traces" bar, when a bar is
    shown (``progress``: True, or None and stderr is a terminal; see :func:`simcast.serving.search.parallel.pmap`)
    and more than one trace is missing. Otherwise nothing: the tasks compile them as before."""
    from simcast.serving.search.parallel import pmap, progress_shown

    if not progress_shown(len(cfgs), progress):
        return
    keys = missing_keys(cfgs, use_disk_cache)
    if len(keys) > 1:
        pmap(_compile, [(k, use_disk_cache) for k in keys], desc="stage traces", progress=True)
