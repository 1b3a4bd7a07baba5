"""The `ssh:` seed form, the `hosts:` list, or one local host; with top-level defaults (`gpus`,
`max_parallel`, `max_jobs_per_gpu`, `max_cpu_jobs`)."""

from __future__ import annotations

import re
from dataclasses import asdict, replace
from typing import Any

from eq_tui.manifest import schema
from eq_tui.manifest.model import HostSpec, SimulateSpec, SlurmSpec
from eq_tui.manifest.schema import Context
from eq_tui.manifest.sharing import HostLimits, parse_host_limits
from eq_tui.manifest.ssh_target import FORMS, parse_ssh_target
from eq_tui.manifest.yaml_lines import Path_

HOST_PATH = re.compile(r"/[A-Za-z0-9_.+/-]*")


def parse_hosts(ctx: Context, top: dict[str, Any]) -> tuple[HostSpec, ...]:
    default_gpus = gpu_list(ctx, top["gpus"], ("gpus",)) if "gpus" in top else None
    default_parallel = ctx.integer(top.get("max_parallel", 8), ("max_parallel",), minimum=1)
    parallel_given = "max_parallel" in top
    limits = parse_host_limits(ctx, top, (), HostLimits())
    if "ssh" in top and "hosts" in top:
        ctx.fail("give either 'ssh' (one host) or 'hosts' (a list), not both", ("hosts",))
    if "ssh" in top:
        target = _ssh_target(ctx, top["ssh"], ("ssh",))
        parsed = parse_ssh_target(target)
        assert parsed is not None  # _ssh_target checked it
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", parsed.host).strip("-") or "host"
        return (HostSpec(name=name, ssh=target, gpus=default_gpus,
                         max_parallel=default_parallel, max_parallel_given=parallel_given,
                         **asdict(limits)),)
    if "hosts" not in top:
        return (HostSpec(name="local", gpus=default_gpus, max_parallel=default_parallel,
                         max_parallel_given=parallel_given, **asdict(limits)),)
    raw_hosts = ctx.list_of(top["hosts"], ("hosts",))
    if not raw_hosts:
        ctx.fail("the host list is empty", ("hosts",))
    hosts: list[HostSpec] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_hosts):
        host = _host(ctx, raw, ("hosts", i), default_gpus, default_parallel, limits)
        if parallel_given and not host.max_parallel_given:
            host = replace(host, max_parallel_given=True)
        if host.name in seen:
            ctx.fail(f"host name {host.name!r} is used twice (also hosts[{seen[host.name]}])",
                     ("hosts", i, "name"))
        seen[host.name] = i
        hosts.append(host)
    return tuple(hosts)


def gpu_list(ctx: Context, value: Any, path: Path_) -> tuple[int, ...] | None:
    if value == "all":
        return None
    if isinstance(value, str):
        ctx.fail(f"expected a list of GPU indices or 'all', got {value!r}", path)
    items = ctx.list_of(value, path)
    gpus = tuple(ctx.integer(g, (*path, i), minimum=0) for i, g in enumerate(items))
    if not gpus:
        ctx.fail("the GPU list is empty (use 'all' for every GPU)", path)
    if len(set(gpus)) != len(gpus):
        ctx.fail("a GPU is listed twice", path)
    return gpus


def gpu_capacity(host: HostSpec) -> int | None:
    """How many GPUs a job could get on this host; None while unknown (`all` on a real host)."""
    if host.gpus is not None:
        return len(host.gpus)
    if host.simulate is not None:
        return host.simulate.gpus
    return None


def _ssh_target(ctx: Context, value: Any, path: Path_) -> str:
    target = ctx.string(value, path)
    if parse_ssh_target(target) is None:
        ctx.fail(f"{target!r} is not {FORMS}", path)
    return target


def _host(ctx: Context, raw: Any, path: Path_, default_gpus: tuple[int, ...] | None,
          default_parallel: int, default_limits: HostLimits) -> HostSpec:
    host = ctx.mapping(raw, path)
    ctx.check_keys(host, schema.HOST_KEYS, path)
    if "name" not in host:
        ctx.fail("every host needs a 'name'", path)
    name = ctx.identifier(host["name"], (*path, "name"), "host name")
    kinds = [k for k in ("ssh", "simulate", "slurm") if host.get(k) is not None]
    if len(kinds) > 1:
        hint = " (a Slurm login node goes in slurm.ssh)" if "slurm" in kinds else ""
        ctx.fail(f"a host is one of ssh, simulate or slurm, not {' and '.join(kinds)}{hint}",
                 (*path, kinds[1]))
    simulate = _simulate(ctx, host["simulate"], (*path, "simulate")) \
        if host.get("simulate") is not None else None
    gpus = gpu_list(ctx, host["gpus"], (*path, "gpus")) if "gpus" in host else default_gpus
    if simulate is not None and gpus is not None and max(gpus) >= simulate.gpus:
        where = (*path, "gpus") if "gpus" in host else ("gpus",)
        ctx.fail(f"GPU {max(gpus)} does not exist on simulated host {name!r} "
                 f"(it has {simulate.gpus}: 0..{simulate.gpus - 1})", where)
    return HostSpec(
        name=name,
        ssh=_ssh_target(ctx, host["ssh"], (*path, "ssh")) if host.get("ssh") is not None
        else None,
        gpus=gpus,
        max_parallel=ctx.integer(host.get("max_parallel", default_parallel),
                                 (*path, "max_parallel"), minimum=1),
        max_parallel_given="max_parallel" in host,
        simulate=simulate,
        slurm=_slurm(ctx, host["slurm"], (*path, "slurm")) if host.get("slurm") is not None
        else None,
        log_dir=ctx.string(host["log_dir"], (*path, "log_dir"))
        if host.get("log_dir") is not None else None,
        claims_dir=_host_path(ctx, host.get("claims_dir"), (*path, "claims_dir")),
        rules=_host_path(ctx, host.get("rules"), (*path, "rules")),
        **asdict(parse_host_limits(ctx, host, path, default_limits)))


def _host_path(ctx: Context, value: Any, path: Path_) -> str | None:
    """A path on the host that every engine there agrees on (the claims directory): absolute,
    with nothing a shell would split or expand."""
    if value is None:
        return None
    text = ctx.string(value, path)
    if not HOST_PATH.fullmatch(text):
        ctx.fail(f"{text!r} must be an absolute path of letters, digits and _ . + - /", path)
    return text


def _simulate(ctx: Context, raw: Any, path: Path_) -> SimulateSpec:
    sim = ctx.mapping(raw, path)
    ctx.check_keys(sim, schema.SIMULATE_KEYS, path)
    base = SimulateSpec()
    return SimulateSpec(
        gpus=ctx.integer(sim.get("gpus", base.gpus), (*path, "gpus"), minimum=1),
        memory_mib=ctx.integer(sim.get("memory_mib", base.memory_mib),
                               (*path, "memory_mib"), minimum=1),
        model=ctx.string(sim.get("model", base.model), (*path, "model"), allow_numbers=True),
        linger_s=ctx.number(sim.get("linger_s", base.linger_s), (*path, "linger_s"),
                            minimum=0))


def _slurm(ctx: Context, raw: Any, path: Path_) -> SlurmSpec:
    slurm = ctx.mapping(raw, path)
    ctx.check_keys(slurm, schema.SLURM_KEYS, path)

    def text(key: str) -> str | None:
        value = slurm.get(key)
        return None if value is None else ctx.string(value, (*path, key), allow_numbers=True)

    extra = slurm.get("sbatch_args")
    extra_path: Path_ = (*path, "sbatch_args")
    return SlurmSpec(
        ssh=_ssh_target(ctx, slurm["ssh"], (*path, "ssh")) if slurm.get("ssh") is not None
        else None,
        partition=text("partition"), account=text("account"), qos=text("qos"),
        time=text("time"), mem=text("mem"),
        cpus_per_task=ctx.integer(slurm["cpus_per_task"], (*path, "cpus_per_task"), minimum=1)
        if slurm.get("cpus_per_task") is not None else None,
        sbatch_args=tuple(ctx.string(a, (*extra_path, i), allow_numbers=True)
                          for i, a in enumerate(ctx.list_of(extra, extra_path)))
        if extra is not None else ())
