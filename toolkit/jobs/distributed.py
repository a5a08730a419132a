"""Running shards on Ray (``--ray [ADDRESS]``); Ray is imported only here, only when asked for.

Why Ray Core actors and not Ray Data's ``map_batches``: each shard's result must come back
to the driver, be written atomically and be recorded in the manifest before the next is
counted as done (``toolkit.jobs.shards``), with inputs streamed from the driver only for the
shards still to do. A pool of actors (one model load per worker) fed with at most two
shards each does exactly that; Ray restarts a killed worker (``max_restarts``) and
re-runs its shard (``max_task_retries``), so the job finishes without the driver doing
anything. ``ActorPool`` is that pool; it can serve several ``map`` calls (an experiment's
stages) and run *lanes*: items that must run one at a time, in order, on one actor.

Ray's driver prints the cluster's notices (a worker died, a task will be retried) on
stdout; ``connect`` sends them to stderr (``_notices_to_stderr``), so a command's stdout
holds its results only.

Addresses: ``None``/``"local"`` starts a private local Ray for this command (never joins a
cluster that happens to run here), ``auto`` joins the cluster of ``RAY_ADDRESS`` or the
one started on this machine with ``ray start`` (only when the address file is the user's own,
in a folder no one else can write: ``trusted_marker``), ``host:port`` joins that cluster's GCS,
``ray://host:port`` goes through the Ray Client server.

The private local Ray accepts connections from this machine only (``private_cluster``): every
server of it listens on loopback (Ray binds its gRPC servers to the node's address, and that
address is 127.0.0.1 here), there is no dashboard and no Ray Client server, its token
authentication is on with a token of its own in a 0600 file in a 0700 folder (never
``~/.ray/auth_token``), and its session files live in that folder. docs/security.md says more.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from toolkit.errors import ConfigError, TwostageError
from toolkit.guard.numbers import NumberRefused, natural
from toolkit.jobs.shards import Sharding, WorkerSpec, worker_identity

log = logging.getLogger(__name__)

#: Environment the workers need to behave like the driver (offline model loading, quiet tokenizers).
FORWARDED_ENV = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TOKENIZERS_PARALLELISM",
    "HF_HOME",
    "TWOSTAGE_CACHE",
    "TWOSTAGE_DATA",
)
LOCAL = "local"


def ray_version() -> str | None:
    """The installed Ray version (from package metadata: Ray is not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ray")
    except PackageNotFoundError:
        return None


def current_cluster() -> tuple[str | None, str]:
    """The cluster ``--ray auto`` would join, and where that address came from (nothing imported).

    ``RAY_ADDRESS`` is the user's own setting and is taken as is. The address file that ``ray start --head``
    writes (``$RAY_TMPDIR/ray/ray_current_cluster``) is taken only when ``trusted_marker`` finds it safe:
    in Ray's default, world-writable ``/tmp/ray``, any user of the machine could have written it and sent
    ``--ray auto`` (and the pickled results Ray brings back) to a cluster of theirs. An untrusted file
    raises ``ConfigError`` saying why and what to do instead.
    """
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    marker = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"
    if os.path.lexists(marker):
        trusted_marker(marker)
        address = marker.read_text().strip()
        if address:
            return address, f"{marker} (the last `ray start --head` on this machine)"
    return None, "none (no RAY_ADDRESS, no `ray start` cluster on this machine)"


def trusted_marker(marker: Path) -> None:
    """Raise ``ConfigError`` unless ``marker`` is a plain file owned by this user, writable by no one else, in a
    folder owned by this user (or root) that no other user can write."""
    import stat

    uid = os.getuid()
    fix = (
        "give the address explicitly (--ray HOST:PORT or RAY_ADDRESS=HOST:PORT), or start the cluster with "
        "RAY_TMPDIR set to a folder of your own (mode 0700) and the same RAY_TMPDIR here"
    )
    why = None
    st = os.lstat(marker)
    folder = os.lstat(marker.parent)
    if not stat.S_ISREG(st.st_mode):
        why = "is not a plain file (a link or something else)"
    elif st.st_uid != uid:
        why = f"belongs to user id {st.st_uid}, not to you ({uid})"
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    elif folder.st_uid not in (uid, 0):
        why = f"is in {marker.parent}, a folder of user id {folder.st_uid}"
    elif folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = (
            f"is in {marker.parent}, which other users can write (mode {stat.S_IMODE(folder.st_mode):04o}): "
            "anyone could have written it"
        )
    if why is not None:
        raise ConfigError(f"--ray auto: refusing the address file {marker}: it {why}; {fix}")


def reachable(address: str, timeout: float = 1.0) -> bool:
    """Whether something listens at a ``host:port`` / ``ray://host:port`` address."""
    return _connect_error(address, timeout) is None


def _split(address: str) -> tuple[str, int]:
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    try:  # the numbers door: the digits 0-9 only (``--ray host:²`` is no port)
        number = natural(port, what="port", max_digits=5) if colon else 0
    except NumberRefused:
        number = 0
    if not 0 < number < 65536:
        raise ConfigError(f"--ray {address}: not an address (expected auto, HOST:PORT or ray://HOST:PORT)")
    return host or "127.0.0.1", number


def _connect_error(address: str, timeout: float) -> str | None:
    """None when a TCP connection to the address succeeds, else why it did not."""
    import socket

    try:
        host, port = _split(address)
    except ConfigError as exc:
        return str(exc)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


#: Connection attempts before ``--ray ADDRESS`` gives up, each with this timeout, this far apart: a few
#: seconds in all, far inside the 15 s the user waits, and enough for a head node that is just starting.
PROBE_ATTEMPTS, PROBE_TIMEOUT, PROBE_PAUSE = 3, 1.0, 1.0


def check_address(address: str | None) -> None:
    """Fail at once, naming the address and what was tried, when ``--ray ADDRESS`` has no cluster behind it.

    Ray's own ``ray.init`` at a dead address retries for about 14 minutes ("Failed to get cluster ID from
    GCS"); this runs before any shard folder or manifest is made, so nothing is written and nothing is
    left to resume. A local Ray (``--ray`` alone) is started by the job itself and needs no check. Only
    reachability is checked: a port where some other server listens passes here and fails in Ray.
    """
    if address in (None, LOCAL):
        return
    if address == "auto":
        found, source = current_cluster()
        if found is None:
            raise ConfigError(f"--ray auto: no cluster to join: {source}; start one with `ray start --head`")
        address, tried = found, f" (from {source})"
    else:
        tried = ""
    _split(address)  # a malformed address is refused without waiting
    why = None
    for attempt in range(PROBE_ATTEMPTS):
        why = _connect_error(address, PROBE_TIMEOUT)
        if why is None:
            return
        if attempt + 1 < PROBE_ATTEMPTS:
            time.sleep(PROBE_PAUSE)
    host, port = _split(address)
    raise ConfigError(
        f"--ray {address}{tried}: no Ray cluster answers there (tried {PROBE_ATTEMPTS} TCP connections to "
        f"{host}:{port}, {PROBE_PAUSE:g} s apart: {why}); nothing was started or written"
    )


@dataclass(frozen=True)
class RayOptions:
    """``--ray ADDRESS --workers N --gpus-per-worker G`` (+ CPUs per worker and retries)."""

    address: str | None = LOCAL
    workers: int = 2
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    max_retries: int = 3

    def validate(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"--workers must be >= 1, not {self.workers}")
        if self.gpus_per_worker < 0 or self.cpus_per_worker < 0:
            raise ConfigError("--gpus-per-worker and CPUs per worker must be >= 0")
        if self.max_retries < 0:
            raise ConfigError("--max-retries must be >= 0")

    def describe(self) -> dict:
        return {
            "engine": "ray",
            "address": self.address or LOCAL,
            "workers": self.workers,
            "gpus_per_worker": self.gpus_per_worker,
            "cpus_per_worker": self.cpus_per_worker,
            "max_retries": self.max_retries,
            "ray": ray_version(),
        }


def import_ray():
    from toolkit.extras import require

    require("ray", "--ray")
    import ray

    return ray


def connect(options: RayOptions):
    """Join (or start) the Ray cluster of ``options``; returns the ``ray`` module."""
    # Ray's C++ failure-signal handler would replace the JVM's SIGSEGV handler in a driver that has started
    # Java (Lucene texts, Pyserini): the JVM raises SIGSEGV on purpose (null checks, safepoints) and would
    # then crash. The driver keeps its handlers; workers are separate processes and unaffected. The switch is
    # the environment's while this driver's Ray runs: ``shutdown`` restores it, as it does ``PRIVATE_ENV``.
    saved = os.environ.get(SIGNAL_SWITCH)
    os.environ.setdefault(SIGNAL_SWITCH, "1")
    try:
        ray = import_ray()
    except BaseException:
        _restore_env(SIGNAL_SWITCH, saved)
        raise
    if ray.is_initialized():  # the caller's Ray: nothing is started here, so the switch is not needed
        _restore_env(SIGNAL_SWITCH, saved)
        return ray
    if not _PRIVATE.switch_set:  # else an earlier connect's value is kept, if shutdown did not run
        _PRIVATE.switch_set, _PRIVATE.switch_before = True, saved
    _notices_to_stderr()
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    kwargs: dict[str, Any] = {
        "runtime_env": {"env_vars": env},
        "log_to_driver": False,
        "logging_level": logging.WARNING,
        "configure_logging": False,
    }
    address = options.address or LOCAL
    try:
        if address == LOCAL:
            need_cpus = max(options.workers * options.cpus_per_worker, 1)
            with private_cluster(ray) as temp_dir:
                ray.init(
                    address=LOCAL,
                    num_cpus=int(max(need_cpus, os.cpu_count() or 1)),
                    include_dashboard=False,
                    _temp_dir=temp_dir,
                    **kwargs,
                )
            _check_loopback(ray)
        else:
            if address == "auto":  # resolved here, so Ray never reads an address file trusted_marker refused
                address = current_cluster()[0] or address
            # a cluster at a loopback address listens there only (it was started with the switch on): the
            # driver must not swap 127.0.0.1 for the machine's network address, as Ray does by default
            with this_machine_only(ray) if _loopback(address) else contextlib.nullcontext():
                ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        _end_signal_switch()
        raise ConfigError(f"--ray {address}: cannot connect to a Ray cluster there ({exc})") from None
    except (ValueError, RuntimeError) as exc:
        _end_signal_switch()
        raise ConfigError(f"--ray {address}: {exc}") from None
    except BaseException:
        _end_signal_switch()
        raise
    return ray


#: Ray's switch that keeps its C++ failure-signal handler out of the driver (``connect`` says why).
SIGNAL_SWITCH = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"


def _restore_env(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def _end_signal_switch() -> None:
    """Restore ``SIGNAL_SWITCH`` as it was before ``connect`` set it."""
    if _PRIVATE.switch_set:
        _restore_env(SIGNAL_SWITCH, _PRIVATE.switch_before)
        _PRIVATE.switch_set, _PRIVATE.switch_before = False, None


#: The environment of the private local Ray, set while it runs and restored by ``shutdown``: token
#: authentication with its own token (RAY_AUTH_TOKEN_PATH), whatever RAY_AUTH_MODE the user has.
PRIVATE_ENV = MappingProxyType({"RAY_AUTH_MODE": "token"})
#: Ray's switch for "this machine only" (its default on macOS and Windows): with it off, the node's address is
#: 127.0.0.1 and a loopback address is not swapped for the machine's network address; Ray binds its servers
#: to the node's address, so a cluster started so listens on loopback only.
CLUSTER_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@dataclasses.dataclass
class _PrivateCluster:
    """The private local Ray of this process (one at a time: Ray runs one driver per process): its folder and
    the environment it replaced, while it runs; whether the exit hook that removes it is registered; Ray's
    signal switch as ``connect`` found it."""

    folder: str | None = None
    saved: dict[str, str | None] = dataclasses.field(default_factory=dict)
    atexit_registered: bool = False
    #: whether ``connect`` set ``SIGNAL_SWITCH`` (restored by ``shutdown``), and the value it had before
    switch_set: bool = False
    switch_before: str | None = None


#: Declared: the process's one private cluster (set by ``private_cluster``, cleared by ``shutdown``).
_PRIVATE = _PrivateCluster()


@contextlib.contextmanager
def private_cluster(ray) -> Iterator[str]:
    """Prepare a private local Ray: a 0700 folder holding its token (0600) and its session files (in ``ray/``,
    which Ray makes 0777: the folder above keeps others out), the environment above; yields the session folder
    for ``ray.init(_temp_dir=...)``. Undone by ``shutdown`` (or here, on failure)."""
    import secrets
    import tempfile

    # short, under Ray's own temp root: Ray's Unix socket paths inside it must stay under 108 bytes
    folder = tempfile.mkdtemp(prefix="tsray", dir=os.environ.get("RAY_TMPDIR", "/tmp"))  # mode 0700
    token = os.path.join(folder, "auth_token")
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    env = {**PRIVATE_ENV, "RAY_AUTH_TOKEN_PATH": token}
    if not _PRIVATE.atexit_registered:  # a library user who never calls shutdown(): the folder still goes
        import atexit

        atexit.register(shutdown)
        _PRIVATE.atexit_registered = True
    _PRIVATE.folder, _PRIVATE.saved = folder, {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    _refresh_ray_settings()
    try:
        with this_machine_only(ray):
            yield os.path.join(folder, "ray")
    except BaseException:
        _end_private()
        raise


@contextlib.contextmanager
def this_machine_only(ray) -> Iterator[None]:
    """Ray's "this machine only" switch (``CLUSTER_SWITCH``) while a driver starts or joins a cluster: for the
    processes Ray starts (the environment) and for Ray in this process (its constant, read at import)."""
    saved = os.environ.get(CLUSTER_SWITCH)
    constants = None
    with contextlib.suppress(ImportError):
        from ray._private import ray_constants as constants
    enabled = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    os.environ[CLUSTER_SWITCH] = "0"
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False  # services reads it at each call
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(CLUSTER_SWITCH, None)
        else:
            os.environ[CLUSTER_SWITCH] = saved
        if constants is not None:
            constants.ENABLE_RAY_CLUSTER = enabled


def _refresh_ray_settings() -> None:
    """Make an already imported Ray see the authentication settings of the environment (private APIs: guarded)."""
    with contextlib.suppress(ImportError, AttributeError):
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")  # RAY_AUTH_MODE, as Ray itself does when it turns token auth on
        AuthenticationTokenLoader.instance().reset_cache()  # a token of an earlier private Ray is cached


def _loopback(address: str) -> bool:
    """Whether a ``host:port`` / ``ray://host:port`` address reaches this machine's loopback: decided on the
    addresses the host resolves to, as the connection resolves it (``127.1`` and ``localhost`` are loopback),
    by the one loopback decision of ``toolkit.guard.client``."""
    from toolkit.guard.client import resolves_to_loopback

    host, port = _split(address)
    return resolves_to_loopback(host, port)


def _check_loopback(ray) -> None:
    """Stop and refuse a private Ray whose node address is not loopback (a Ray that ignores the switch above)."""
    import ipaddress

    node = ray._private.worker.global_worker.node.node_ip_address
    if not ipaddress.ip_address(node).is_loopback:
        shutdown()
        raise TwostageError(
            f"the private local Ray took the node address {node}, not 127.0.0.1: it would listen on the network; "
            f"this Ray ({ray_version()}) is not supported for --ray alone; use --ray HOST:PORT with a cluster you "
            "started on a trusted network"
        )


def _end_private() -> None:
    """Restore the environment ``private_cluster`` changed and delete its folder (token, session files)."""
    import shutil
    import sys

    if _PRIVATE.folder is None:
        return
    folder, saved = _PRIVATE.folder, _PRIVATE.saved
    _PRIVATE.folder, _PRIVATE.saved = None, {}
    for key, value in saved.items():
        _restore_env(key, value)
    shutil.rmtree(folder, ignore_errors=True)
    if "ray" in sys.modules:
        _refresh_ray_settings()


def _notices_to_stderr() -> None:
    """Send the cluster's notices to the driver's stderr instead of its stdout.

    A Ray driver prints what the cluster publishes for its job ("(raylet) A worker died or was killed while
    executing a task ...") from a background thread, on stdout, in the middle of a command's results. No
    ``ray.init`` option turns that off (``log_to_driver=False`` only silences the workers' own output), so
    this wraps Ray's printer (``ray._private.worker.print_to_stdstream``: private, hence the guard) to mark
    every notice an error line: Ray prints it, with its prefix, on stderr, where twostage's log goes. Nothing
    is dropped, and a task's exception still reaches the driver through ``ray.get`` (the executor's errors).
    """
    try:
        from ray._private import worker as ray_worker
    except ImportError:  # another Ray layout: its notices stay where Ray puts them
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "twostage_stderr", False):
        return

    def to_stderr(data: dict, ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.twostage_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


def shutdown() -> None:
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    _end_private()
    _end_signal_switch()


def ray_sharding(
    ray: str | None,
    shards: str | os.PathLike | None,
    workers: int | None,
    gpus_per_worker: float | None,
    force: bool,
    cpus_per_worker: float | None = None,
    shard_size: int | None = None,
    max_retries: int | None = None,
) -> Sharding | None:
    """The ``Sharding`` of the API's ``ray=`` (the job's manifest and shard results kept under ``shards``), with
    the defaults of ``RayOptions`` for what is not given; None runs in this process."""
    if ray is None:
        return None
    if shards is None:
        raise ConfigError("ray= needs shards=FOLDER: where the job's manifest and shard results are kept")
    options = RayOptions(
        ray,
        workers or 2,
        gpus_per_worker or 0.0,
        1.0 if cpus_per_worker is None else cpus_per_worker,
        3 if max_retries is None else max_retries,
    )
    return Sharding(RayExecutor(options), Path(shards), shard_size, force)


def close_sharding(sharding: Sharding | None) -> None:
    """Ray shut down (and a private cluster ended) after a job that ran on it; nothing without a sharding."""
    if sharding is not None:
        shutdown()


class _ShardActor:
    """A Ray actor holding one built worker (the model is loaded once per actor process)."""

    def __init__(self, spec: WorkerSpec):
        self._worker = spec.build()

    def run(self, shard: int, payload: Any):
        started = time.perf_counter()
        arrays, stats = self._worker(payload)
        return shard, arrays, {**stats, "worker": worker_identity(), "seconds": round(time.perf_counter() - started, 3)}

    def pid(self) -> int:
        return os.getpid()

    def identity(self) -> dict:
        return worker_identity()


@dataclass
class RayExecutor:
    """A pool of ``workers`` actors; each gets at most ``in_flight`` shards at a time."""

    options: RayOptions
    in_flight: int = 2
    description: dict = field(init=False)

    def __post_init__(self) -> None:
        self.options.validate()
        check_address(self.options.address)  # before the job makes its shard folder
        self.description = self.options.describe()

    def pool(self, spec: WorkerSpec) -> ActorPool:
        """Connect and start ``workers`` actors built from ``spec``, kept for several ``map`` calls until ``close``."""
        return ActorPool(connect(self.options), spec, self.options, self.in_flight)

    def map(self, spec: WorkerSpec, payloads: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, dict, dict]]:
        pool = self.pool(spec)
        try:
            yield from pool.map(payloads)
        finally:
            pool.close()


class ActorPool:
    """Ray actors built once from one ``WorkerSpec`` and fed (shard, payload) items by ``map``, as often as asked.

    Each actor takes at most ``in_flight`` items at a time, the least loaded first. An item may belong to a
    *lane* (``map(..., lane=...)``): the items of one lane run one at a time, in the order given, on the one
    actor the lane was given when first seen (``worker_of``). Ray alone would not keep that order when it
    retries the tasks of a restarted actor, hence one at a time. Work whose result depends on what ran before
    it (a bi-encoder's embedding cache) goes in a lane, so it runs in the same order as in one process.
    """

    def __init__(self, ray, spec: WorkerSpec, options: RayOptions, in_flight: int = 2):
        self.ray, self.options, self.in_flight = ray, options, in_flight
        actor_cls = ray.remote(
            num_cpus=options.cpus_per_worker,
            num_gpus=options.gpus_per_worker,
            max_restarts=options.max_retries,
            max_task_retries=options.max_retries,
        )(_ShardActor)
        self.actors = [actor_cls.remote(spec) for _ in range(options.workers)]
        self.lanes: dict[Hashable, int] = {}  # lane -> actor, for the pool's lifetime

    def _lane_actor(self, lane: Hashable) -> int:
        if lane not in self.lanes:  # the actor with the fewest lanes, the first of equals
            taken = [sum(1 for a in self.lanes.values() if a == i) for i in range(len(self.actors))]
            self.lanes[lane] = min(range(len(self.actors)), key=lambda i: (taken[i], i))
        return self.lanes[lane]

    def worker_of(self, lane: Hashable) -> dict:
        """The host and pid of the actor that runs ``lane``'s items (the lane is given one now if new)."""
        return self.ray.get(self.actors[self._lane_actor(lane)].identity.remote())

    def map(
        self,
        payloads: Iterable[tuple[int, Any]],
        lane: Callable[[Any], Hashable | None] | None = None,
        name: Callable[[int], str] = "shard {}".format,
    ) -> Iterator[tuple[int, dict, dict]]:
        """Yield (shard, arrays, info) as each item finishes; ``lane(payload)`` names an item's lane (None: any
        actor); ``name(shard)`` names an item in errors."""
        ray, o = self.ray, self.options
        from ray.exceptions import ActorDiedError, RayActorError, RayError, RayTaskError

        pending: dict[Any, tuple[int, int, Hashable | None]] = {}  # ref -> (shard, actor, lane)
        load = [0] * len(self.actors)
        busy: set[Hashable] = set()  # lanes with an item in flight
        backlog: list[tuple[int, Any, Hashable | None]] = []  # items read but not yet submitted, in order
        feed = iter(payloads)
        exhausted = False

        def place(item_lane: Hashable | None) -> int | None:
            if item_lane is not None:
                a = self._lane_actor(item_lane)
                return a if item_lane not in busy and load[a] < self.in_flight else None
            free = [i for i, n in enumerate(load) if n < self.in_flight]
            return min(free, key=lambda i: load[i]) if free else None

        def submit() -> None:
            nonlocal exhausted
            while True:
                blocked: set[Hashable] = set()  # a lane whose first waiting item cannot go yet: none of it can
                for item in list(backlog):
                    shard, payload, item_lane = item
                    if item_lane in blocked:
                        continue
                    a = place(item_lane)
                    if a is None:
                        if item_lane is not None:
                            blocked.add(item_lane)
                        continue
                    backlog.remove(item)
                    pending[self.actors[a].run.remote(shard, payload)] = (shard, a, item_lane)
                    load[a] += 1
                    if item_lane is not None:
                        busy.add(item_lane)
                if exhausted or all(n >= self.in_flight for n in load):
                    return
                try:
                    shard, payload = next(feed)
                except StopIteration:
                    exhausted = True
                    return
                backlog.append((shard, payload, lane(payload) if lane else None))

        try:
            submit()
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                shard, a, item_lane = pending.pop(done[0])
                load[a] -= 1
                busy.discard(item_lane)
                try:
                    result = ray.get(done[0])
                except RayTaskError as exc:  # the worker code raised: bad input, model error
                    cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                    raise TwostageError(
                        f"{name(shard)} failed on a Ray worker: {type(cause).__name__}: {cause}"
                    ) from None
                except (ActorDiedError, RayActorError) as exc:
                    raise TwostageError(
                        f"{name(shard)}: its Ray worker died {o.max_retries + 1} times "
                        f"({type(exc).__name__}); the last error: {str(exc).splitlines()[0]}"
                    ) from None
                submit()
                yield result
            if backlog:  # cannot happen: every lane frees when its item returns
                raise TwostageError(f"{len(backlog)} item(s) were never submitted")
        except RayError as exc:  # the cluster itself went away (head node stopped, network gone)
            raise TwostageError(
                f"the Ray cluster ({o.address or LOCAL}) failed mid-job: {type(exc).__name__}: "
                f"{(str(exc).splitlines() or [''])[0]}"
            ) from None

    def close(self) -> None:
        """Kill the actors (also ends items still in flight: they were not recorded)."""
        for actor in self.actors:
            with contextlib.suppress(Exception):  # a dead cluster cannot kill anything
                self.ray.kill(actor)
        self.actors = []
