"""Ordinary log lines: a healthy job's steps, checkpoints and banners, the kubelet's chatter."""

from __future__ import annotations

import math
from collections.abc import Iterable

from .cluster import FIRST_MINUTE, LAST_MINUTE, AnyPod, Context, JobSetSpec, Node, Pod
from .deterministic import rand_float, rand_int


class TrainingNoise:
    """What a healthy job and its nodes log between the failures."""

    ctx: Context
    nodes: list[Node]
    pods: list[AnyPod]

    def training_noise(
        self,
        spec: JobSetSpec,
        style: str,
        *,
        every: int = 4,
        checkpoint_every: int = 20,
        workers: bool = True,
        quiet: Iterable[tuple[int, int]] = (),
    ) -> None:
        """Ordinary INFO lines from the coordinator (and a few from other workers).

        Nothing is logged in the ``quiet`` minute ranges [a, b) (a hung job) nor while a pod
        of the attempt has failed or sits on a node that is not Ready. Each attempt resumes
        from the last checkpoint the previous one saved.
        """
        quiet = list(quiet)
        steps_per_min = {"maxtext": 27, "megatron": 14, "hf": 9, "diffusion": 130, "jax": 22}[style]
        last_ckpt: int | None = None
        for attempt in sorted({p.attempt for p in self.pods if p.spec is spec}):
            group = [p for p in self.pods if p.spec is spec and p.attempt == attempt]
            coord = next(p for p in group if p.coordinator)
            first_run = next((s for s, ph in coord.phases if ph == "Running"), None)
            if first_run is None:
                continue
            resume = last_ckpt if last_ckpt is not None else 1000 * (40 + attempt)
            if first_run >= FIRST_MINUTE:
                self.startup_lines(coord, first_run + 0.2, style, resume)

            def disturbed(m: int, group: list[Pod] = group) -> bool:
                for x in (m, m + 1):
                    if any(a <= x < b for a, b in quiet):
                        return True
                    for p in group:
                        if p.phase_at(x) not in ("Running", None if x == m + 1 else "-"):
                            return True
                        if p.node is not None and p.node.not_ready.get(x):
                            return True
                return False

            last = coord.end_m if coord.end_m is not None else LAST_MINUTE + 1
            for m in range(first_run, min(last, LAST_MINUTE + 1)):
                if coord.phase_at(m) != "Running" or disturbed(m):
                    continue
                k = m - first_run
                step = resume + k * steps_per_min
                if k % checkpoint_every == checkpoint_every - 1:
                    last_ckpt = step
                    if m >= FIRST_MINUTE:
                        self.container_log(
                            coord,
                            m + 0.8,
                            checkpoint_line(style, step, spec, self.ctx),
                            key=("ckpt", m),
                        )
                if m < FIRST_MINUTE or k % every != 1:
                    continue
                self.container_log(
                    coord, m + 0.55, train_line(style, step, coord, self.ctx), key=("train", m)
                )
                if workers and k % (every * 4) == 1:
                    for other in group:
                        if (
                            not other.coordinator
                            and other.p == 1
                            and other.phase_at(m) == "Running"
                        ):
                            self.container_log(
                                other, m + 0.58, worker_line(style, step, other), key=("worker", m)
                            )

    def startup_lines(self, pod: Pod, m: float, style: str, resume: int) -> None:
        spec = pod.spec
        lines = {
            "maxtext": [
                f"Num_devices: {4 * spec.size}, shape (1, {spec.replicas}, {4 * spec.parallelism},"
                " 1, 1, 1, 1, 1)",
                "Setting up checkpoint logger...",
                f"restoring from this run's directory step {resume}",
                "Memstats: After params initialized:",
            ],
            "jax": [
                f"JAX distributed initialized: process 0 of {spec.size}",
                f"Restored checkpoint step {resume}",
            ],
            "megatron": [
                "> initializing torch distributed ...",
                "NCCL version 2.21.5+cuda12.4",
                f"  loading checkpoint from /ckpt/{spec.name} at iteration {resume}",
                "> building train, validation, and test datasets ...",
            ],
            "hf": [
                "***** Running training *****",
                f"  Resuming from checkpoint-{resume}",
                "  Num examples = 1,804,211",
            ],
            "diffusion": [
                f"[rank0] world size {8 * spec.size}, resuming from step {resume}",
                "[rank0] EMA weights loaded",
            ],
        }[style]
        for i, line in enumerate(lines):
            self.container_log(pod, m + 0.03 * i, line, key=("startup", i))
        if style in ("megatron", "hf", "diffusion"):
            ip = pod.ip
            self.container_log(
                pod,
                m + 0.15,
                f"{pod.name}:{rand_int(100, 999, 'pid', pod.name)}:"
                f"{rand_int(100, 999, 'pid2', pod.name)} [0] NCCL INFO Bootstrap : "
                f"Using eth0:{ip}<0>",
                key="nccl-info",
            )
            self.container_log(
                pod,
                m + 0.16,
                f"{pod.name}:{rand_int(100, 999, 'pid', pod.name)}:"
                f"{rand_int(100, 999, 'pid2', pod.name)} [0] NCCL INFO comm 0x5589a2c0 "
                f"rank 0 nranks {8 * spec.size} cudaDev 0 nvmlDev 0 busId 4000 - Init COMPLETE",
                key="nccl-info2",
            )

    def kubelet_noise(self, every: int = 29) -> None:
        for i, node in enumerate(self.nodes):
            for m in range(FIRST_MINUTE + 3 + 5 * i, LAST_MINUTE, every):
                if node.not_ready.get(m):
                    continue
                if (m + i) % 2:
                    self.kubelet_journal(
                        node, m + 0.3, "SyncLoop (PLEG): event for pod", "kubelet.go:2462"
                    )
                else:
                    self.kubelet_journal(
                        node,
                        m + 0.3,
                        '"Image garbage collection succeeded" freedBytes=0',
                        "image_gc_manager.go:392",
                    )


def train_line(style: str, step: int, pod: Pod, ctx: Context) -> str:
    loss = 2.9 * math.exp(-step / 90000) + 1.35 + rand_float(-0.03, 0.03, "loss", step)
    if style == "maxtext":
        return (
            f"completed step: {step}, seconds: {rand_float(2.18, 2.26, 's', step):.3f}, "
            f"TFLOP/s/device: {rand_float(318, 324, 'tf', step):.3f}, "
            f"Tokens/s/device: {rand_float(3700, 3760, 'tok', step):.3f}, "
            f"total_weights: 2097152, loss: {loss:.3f}"
        )
    if style == "jax":
        return (
            f"step={step} loss={loss:.4f} grad_norm={rand_float(0.2, 0.5, 'gn', step):.3f} "
            f"examples/s={rand_float(880, 905, 'ex', step):.1f}"
        )
    if style == "megatron":
        return (
            f" iteration {step:>8d}/  320000 | consumed samples: {step * 1024:>12d} | "
            f"elapsed time per iteration (ms): {rand_float(4180, 4260, 'it', step):.1f} | "
            f"learning rate: {rand_float(5.9, 6.0, 'lr', step):.3f}E-05 | "
            f"global batch size:  1024 | lm loss: {loss:.6E} | loss scale: 1.0 | "
            f"grad norm: {rand_float(0.3, 0.5, 'gn', step):.3f} | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
    if style == "hf":
        return (
            f"{{'loss': {loss - 0.6:.4f}, 'grad_norm': {rand_float(0.5, 1.2, 'gn', step):.4f}, "
            f"'learning_rate': {rand_float(1.5, 2.0, 'lr', step):.4e}, "
            f"'epoch': {step / 40000:.2f}}}"
        )
    return (
        f"[rank0] step {step} | loss {loss / 12:.4f} | lr 1.00e-04 | "
        f"it/s {rand_float(2.2, 2.4, 'its', step):.2f}"
    )


def worker_line(style: str, step: int, pod: Pod) -> str:
    if style in ("maxtext", "jax"):
        worker = pod.j * pod.spec.parallelism + pod.p
        return f"Worker {worker}: per-host data iterator at step {step}"
    rank = 8 * (pod.j * pod.spec.parallelism + pod.p)
    return f"[rank{rank}] dataloader: prefetch queue depth 8, step {step}"


def checkpoint_line(style: str, step: int, spec: JobSetSpec, ctx: Context) -> str:
    bucket = f"gs://{ctx.project}-ckpt/{spec.name}"
    if style in ("maxtext", "jax"):
        return f"Saving checkpoint for step {step} to {bucket}/checkpoints/{step}"
    if style == "hf":
        return f"Saving model checkpoint to /ckpt/{spec.name}/checkpoint-{step}"
    return f"saving checkpoint at iteration {step:>8d} to {bucket}"
