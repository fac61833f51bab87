"""Every knob of the service, read from ``FACEGATE_*`` environment variables (or a ``.env``).

Only the edges (``create_app()``, the CLI) call :func:`get_settings`; lower layers take the
explicit values they need, so tests build them without touching the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from facegate.errors import InvalidSettings
from facegate.machine import default_memory_budget, machine_cores
from facegate.networks import parse_allowed

JwtAlgorithm = Literal["HS256", "RS256", "ES256"]
_ALL_JWT_ALGORITHMS: tuple[JwtAlgorithm, ...] = ("HS256", "RS256", "ES256")


class Settings(BaseSettings):
    """The service configuration. Field ``x`` is read from ``FACEGATE_X``."""

    model_config = SettingsConfigDict(
        env_prefix="FACEGATE_", env_file=".env", extra="ignore", frozen=True
    )

    # Backends: the same code runs embedded (SQLite, local folder, in-memory limits) or as
    # a cluster (PostgreSQL, S3, Redis) depending only on these URLs.
    database_url: str = "sqlite:///./var/facegate.db"
    storage_url: str = "file://./var/storage"
    redis_url: str | None = None
    models_dir: Path = Path("./var/models")
    # `facegate storage reconcile`: an object without a ledger row is an orphan once it is
    # this old (a submission writes its inputs before it commits their rows); --grace wins.
    storage_orphan_grace_seconds: int = Field(default=600, ge=0, le=30 * 86400)
    # The cluster shape: the installation's models live in the object storage above (shared
    # models under models/, a tenant's own under its prefix) and models_dir only caches the
    # files a process used (an emptyDir in the manifests). Off: models_dir is the store.
    models_in_storage: bool = False
    # The installation's default model tag (the specification's MODEL_TAG): used for every
    # model installed with that tag unless a tenant's policy pins or splits it.
    model_tag: str | None = None
    # Models loaded at start (comma-separated names), so the first job pays no cold start
    # (one on the CUDA provider also runs once on zeros: its first call sets up the device).
    warmup_models: str = ""
    # The inference pool every process loads its models into (engine/modelstore/inference.py):
    # threads of each onnxruntime session within one operator, which ncnn (the built-in
    # upscaler) uses too (0: one per core); threads across operators (0: onnxruntime's
    # choice); the bytes of loaded models it keeps (their file sizes; past it the least
    # recently used go, the one just loaded always stays); the device of the ONNX models:
    # auto (CUDA where onnxruntime-gpu offers it, else the CPU), cpu, or cuda (a process
    # refuses to start without onnxruntime's CUDA provider). The built-in mediapipe and ncnn
    # models always run on the CPU. Spin-waiting: onnxruntime's threads spin between runs
    # (faster alone, CPU taken from the neighbours on shared cores; off unless set).
    inference_intra_op_threads: int = Field(default=0, ge=0, le=1024)
    inference_inter_op_threads: int = Field(default=1, ge=0, le=1024)
    inference_spin_wait: bool = False
    inference_max_bytes: int = Field(default=4 << 30, ge=0)
    inference_device: Literal["auto", "cuda", "cpu"] = "auto"
    # onnxruntime's CUDA provider (a device worker; docs/scheduling-memory.md): the most bytes
    # of a device one session's arena may take (gpu_mem_limit; unset: no cap), and how the
    # arena grows: by what is asked (kSameAsRequested: the budget's accounting holds) or
    # in powers of two (kNextPowerOfTwo, onnxruntime's default: fewer, larger allocations).
    inference_gpu_mem_limit: int | None = Field(default=None, ge=1)
    inference_arena_extend_strategy: Literal["kNextPowerOfTwo", "kSameAsRequested"] = (
        "kSameAsRequested"
    )
    data_dir: Path = Path("./var")
    # Schema at start: "migrate" brings the database to this release's head under a
    # PostgreSQL advisory lock (the embedded shape; racing processes migrate once); "check"
    # refuses to start unless it is already there (the cluster: `facegate db upgrade` runs
    # once as the api's init container, docs/deploy.md).
    schema_on_start: Literal["migrate", "check"] = "migrate"

    # Serving
    workers: int = Field(default=2, ge=0, le=256)
    # Only these tenants' jobs are claimed here, comma-separated (the specification's
    # TENANT_ID maps onto it): a tenant's own pod, physically isolated. Unset: every tenant.
    worker_tenants: str | None = None
    # A `facegate worker` process (its flags win): jobs run at once (default: workers, else
    # 2), the drain on SIGTERM, the heartbeat period, whether its jobs hold an accelerator
    # (default: when onnxruntime offers CUDA) and a "module:factory" JobRunner.
    worker_concurrency: int | None = Field(default=None, ge=1, le=256)
    worker_grace_seconds: float = Field(default=30.0, ge=0, le=3600)
    worker_heartbeat_seconds: float = Field(default=5.0, ge=0.1, le=600)
    worker_device: bool | None = None
    worker_runner: str | None = None
    # Scheduling (docs/scheduling.md). `serve` runs its workers as child processes at a
    # lower CPU priority than the API (False: threads of the API process, as tests do).
    worker_processes: bool = True
    # Nice increment of workers that take long jobs (`serve`'s children, `facegate worker`):
    # the API and the short-job lane keep the CPU when a long job competes with them.
    worker_nice: int = Field(default=19, ge=0, le=19)
    # The short-job lane: workers that take only jobs estimated (facegate.jobs.cost) at most
    # short_lane_seconds, so a one-face image never waits behind a long video or a 4K
    # upscale. `serve` runs short_lane_workers of them in a process of their own at
    # short_lane_nice; `facegate worker --lane short` is one in the cluster shape.
    short_lane_workers: int = Field(default=1, ge=0, le=64)
    short_lane_seconds: float = Field(default=5.0, gt=0, le=3600)
    short_lane_nice: int = Field(default=0, ge=0, le=19)
    # While this process serves live streams (streams_per_process > 0), its job workers run
    # at least this nice (Settings.job_nice): live is the CPU's latency class, and a video
    # job's segments (short-lane jobs) at nice 0 took a stream's frames' CPU (docs/live.md).
    # 0: jobs keep their lane's nice beside streams.
    stream_job_nice: int = Field(default=10, ge=0, le=19)
    # A worker's memory budget (docs/scheduling-memory.md): the estimated peaks
    # (facegate.jobs.cost) of the jobs it holds at once stay within it, and a job over every
    # live worker's budget is refused at submission (422 memory-budget-exceeded). Unset: on
    # a CPU worker 3/4 of the machine's memory (its container's limit where lower); on a
    # CUDA worker the memory of one device, inference_gpu_mem_limit, when that is set.
    worker_memory_bytes: int | None = Field(default=None, ge=1)
    # A running job's lease: renewed every third of it; a job whose worker vanished (crash,
    # SIGKILL) is requeued once it expires.
    job_lease_seconds: float = Field(default=30.0, gt=0, le=3600)
    job_poll_seconds: float = Field(default=0.5, gt=0, le=60)
    # A video at least twice this long is cut into parts of about this many seconds that
    # several workers run at once, each part an ordinary job of the fair claim (0: never).
    video_segment_seconds: float = Field(default=6.0, ge=0, le=3600)
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    demo: bool = False
    log_level: str = "info"
    # mediapipe's native log lines on stderr are filtered out unless this is set.
    native_logs: bool = False

    # Observability (facegate.observability; docs/observability.md)
    log_format: Literal["json", "console"] = "json"
    access_log: bool = True
    metrics_enabled: bool = True
    # Tenants with their own `tenant` label value per process; later ones share "other"
    # (0: none). Bounds the number of Prometheus series.
    metrics_tenant_cap: int = Field(default=100, ge=0, le=10_000)
    metrics_token: SecretStr | None = None  # when set, /metrics needs "Bearer <token>"
    # Without a token /metrics answers only loopback and private addresses, unless this.
    metrics_public: bool = False
    usage_event_source: str = "facegate"  # CloudEvents `source` of exported usage

    # JWT: which algorithms are accepted is decided by which keys are configured, and each
    # key only verifies tokens of its own family (see facegate.tenancy.jwt).
    jwt_algorithms: list[JwtAlgorithm] = Field(default_factory=lambda: list(_ALL_JWT_ALGORITHMS))
    jwt_hs_secret: SecretStr | None = None
    jwt_public_key: str | None = None  # PEM text of an RSA or EC public key
    jwt_public_key_file: Path | None = None
    jwt_jwks_file: Path | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_tenant_claim: str = "tenant"
    jwt_scope_claim: str = "scope"
    # A claim that, set to true, makes a token's ``admin`` scope platform-wide. Unset: a
    # JWT's ``admin`` administers only its own tenant (platform admins use API keys).
    jwt_platform_admin_claim: str | None = None
    jwt_leeway_seconds: int = Field(default=30, ge=0, le=600)

    # Gateway: rate limits (Redis when redis_url is set, else in memory), fail2ban-style
    # bans, load shedding and circuit breakers (see docs/cluster.md).
    rate_limit_enabled: bool = True
    rate_limit_ip_per_minute: int = Field(default=120, ge=1)  # unauthenticated, per IP
    rate_limit_fail_mode: Literal["open", "closed"] = "open"  # when Redis is unreachable
    rate_limit_key_prefix: str = "facegate"
    trusted_proxies: list[str] = Field(default_factory=list)  # CIDRs allowed to set XFF
    # IPv6 clients are keyed by this network for bans, rate limits and in-flight shares
    # (a /64 is one subscriber's LAN); IPv4 clients by their address.
    client_ipv6_prefix: int = Field(default=64, ge=16, le=128)
    ban_max_failures: int = Field(default=5, ge=1)
    ban_window_seconds: int = Field(default=600, ge=1)
    ban_seconds: int = Field(default=600, ge=1)  # doubles with each repeat ban
    ban_max_seconds: int = Field(default=7 * 24 * 3600, ge=1)
    max_in_flight_requests: int = Field(default=256, ge=0)  # 0: no cap
    max_queued_jobs_total: int = Field(default=10_000, ge=0)  # all tenants; 0: no cap
    # Request bodies (api/bodyguard.py): JSON bodies, model uploads, the slowest body allowed.
    max_json_body_bytes: int = Field(default=1 << 20, ge=1024)
    # inswapper_128 is 554 MB; nothing FaceFusion ships is over 1 GB.
    max_model_bytes: int = Field(default=1 << 30, ge=1)
    body_min_bytes_per_second: int = Field(default=16 * 1024, ge=1)
    body_grace_seconds: float = Field(default=10.0, gt=0, le=600)
    # In-flight requests one client IP may hold, and all requests without credentials
    # together (0: a sixteenth / an eighth of max_in_flight_requests).
    max_in_flight_per_client: int = Field(default=0, ge=0)
    max_in_flight_unauthenticated: int = Field(default=0, ge=0)
    # Request bodies one tenant may be sending at once (0: a quarter of the in-flight cap).
    max_in_flight_per_tenant: int = Field(default=0, ge=0)
    # Public uploads (POST /v1/verify, POST /v1/reports) without valid credentials: their
    # own in-flight share (0: a sixteenth of the cap), a smaller body, and a wall-clock
    # deadline for the whole body whatever its rate.
    max_in_flight_public_uploads: int = Field(default=0, ge=0)
    public_upload_max_bytes: int = Field(default=32 * 1024**2, ge=1024)
    public_upload_deadline_seconds: float = Field(default=120.0, gt=0, le=3600)
    shed_retry_after_seconds: int = Field(default=5, ge=1)
    breaker_failure_threshold: int = Field(default=5, ge=1)
    breaker_reset_seconds: float = Field(default=10.0, gt=0)

    # Provenance (docs/provenance.md): the folder of the installation's C2PA signing key and
    # certificate chain (a Kubernetes Secret in the cluster shape); default <data_dir>/provenance.
    # `facegate provenance init` makes a private CA and signing certificate there.
    provenance_dir: Path | None = None
    verify_max_bytes: int = Field(default=200 * 1024**2, ge=1)  # POST /v1/verify uploads
    # A verification without valid credentials (provenance/limits.py): videos at most this
    # many pixels, seconds, frames per second and frames, of which at most
    # public_verify_decode_frames are decoded (seeking to the samples); images at most
    # public_verify_max_pixels too; this many such verifications decode at once per process.
    public_verify_max_pixels: int = Field(default=1920 * 1080, ge=64 * 64)
    public_verify_max_seconds: float = Field(default=300.0, gt=0)
    public_verify_max_fps: float = Field(default=60.0, gt=0)
    public_verify_max_frames: int = Field(default=18_000, ge=1)
    public_verify_decode_frames: int = Field(default=48, ge=1, le=1000)
    public_verify_concurrency: int = Field(default=2, ge=1, le=256)

    # Content moderation of videos (engine/screening.py): no run of this many seconds of
    # presentation time, nor of as many frames at 30 fps, goes unchecked in an input or an
    # output video (0.5: about two checked frames a second at 30 fps, from a random phase).
    moderation_video_gap_seconds: float = Field(default=0.5, gt=0, le=10)
    # Face analysis in the API process (POST /v1/faces, POST /v1/faces/library; outside the
    # workers' job caps): at most this many at once per process, and per tenant; beyond,
    # 503 / 429 at once (library/analysis.py).
    face_analysis_slots: int = Field(default=2, ge=1, le=256)
    face_analysis_per_tenant: int = Field(default=1, ge=1, le=256)
    # Live streams (facegate.streams): a stream whose client sends no video frame for this
    # long is closed (metering stops then); the credentials and the tenant of every running
    # stream are checked again this often (a revoked key or a suspended tenant ends it);
    # moderation samples one output frame in this many seconds.
    # How many live streams this process runs at once, all tenants together (each holds an
    # engine thread): past it a start is 503 with Retry-After, whatever the tenant's cap.
    streams_per_process: int = Field(default=2, ge=0, le=256)
    # The cores this process's live streams may take together (facegate.stream_cpu): while
    # streams run, the process's CPU is paced to stay within it, and a start is 503 when
    # the budget could not give every stream, the new one too, stream_min_cores. Unset: the
    # process's cores (its container's CPU limit if lower) less one when job workers run
    # beside it (`serve`: the jobs keep at least a core), all of them otherwise (`api`).
    stream_cores: float | None = Field(default=None, gt=0, le=1024)
    # Each stream's engine work (tracking, the swap, label and watermark) in a child process
    # of its own (facegate.streams.engines: reused by the next stream, frames through shared
    # memory), out of the API process's interpreter lock; off: a thread of the API process.
    stream_engine_process: bool = True
    # Engine children started with the process (in the background, before any stream), kept
    # idle for the first streams: without one, a process's first stream runs in the API
    # process for the seconds a child takes to load the engine (p95 128 ms in its first
    # 10 s against 47 ms after). Each idle child holds ~170 MiB. At most
    # streams_per_process; 0: the first stream starts one.
    stream_engines_warm: int = Field(default=1, ge=0, le=256)
    stream_min_cores: float = Field(default=0.5, gt=0, le=1024)
    stream_silence_seconds: float = Field(default=5.0, gt=0, le=60)
    stream_check_seconds: float = Field(default=2.0, gt=0, le=60)
    stream_moderation_seconds: float = Field(default=1.0, gt=0, le=60)
    # A running stream's usage record and its heartbeat are rewritten this often: a
    # process that dies mid-stream leaves its usage as of the last checkpoint, and a stream
    # three checkpoints late is ended by another process's sweep (run this often too).
    stream_checkpoint_seconds: float = Field(default=5.0, gt=0, le=300)
    # ICE servers of live streams (facegate.streams.ice; docs/live.md). stream_ice_urls are
    # what clients are given (GET /v1/streams/ice: "stun:HOST:PORT", "turn:HOST:PORT",
    # "turns:HOST:PORT", with "?transport=udp|tcp"): STUN for a public address, TURN to
    # relay through when the server's UDP ports cannot be reached (a Kubernetes cluster).
    # The server's own side gathers from stream_server_ice_urls (unset: the same; in a
    # cluster the TURN Service's in-cluster name). TURN credentials are time-limited TURN
    # REST ones made from stream_turn_secret (coturn's static-auth-secret), which never
    # leaves the service: each lasts stream_turn_start_seconds plus the tenant's
    # max_stream_seconds. stream_ice_relay_only: the server offers relay candidates only
    # (its pod addresses are never shown to clients). None: host candidates only.
    stream_ice_urls: list[str] = Field(default_factory=list)
    stream_server_ice_urls: list[str] | None = None
    stream_turn_secret: SecretStr | None = None
    stream_turn_start_seconds: int = Field(default=300, ge=10, le=86400)
    stream_ice_relay_only: bool = False
    # Where this API process's peers reach it (http://POD_IP:8000 in a cluster): with it,
    # the process says how many more streams it would take (stream_nodes), and a start it
    # must refuse for lack of room (503 streams_per_process or stream_cores) is handed, as
    # the client sent it, to the peer with the most room (facegate.streams.placement). None:
    # no placement (the embedded shape's one process).
    stream_peer_url: str | None = Field(default=None, pattern=r"^https?://[^/?#]+$", max_length=500)
    # POST /v1/reports (facegate.provenance.reports): one case per reporter and subject (the
    # job, or the file) per window, however often it is sent; new cases a reporter (a client
    # address, its IPv6 /64, or a credential) may open per hour; cases one subject collects
    # from distinct reporters per window before further reports join the latest.
    report_window_seconds: int = Field(default=86400, ge=60)
    reports_per_hour: int = Field(default=10, ge=1)
    reports_per_subject: int = Field(default=20, ge=1)

    # A batch's whole upload (POST /v1/batches: up to 100 targets; each file is still held
    # to the tenant's max_input_bytes).
    max_batch_body_bytes: int = Field(default=512 * 1024**2, ge=1024)

    # Webhooks (facegate.webhooks): the operator's allow-list of networks a webhook may reach
    # although they are not public (CIDRs, each with the ports it opens, 80 and 443 unless
    # it names others: facegate.networks), an attempt's deadline (wall clock, connect to
    # answer), attempts sent at once per tenant, retries.
    webhook_allowed_networks: list[str] = Field(default_factory=list)
    webhook_timeout_seconds: float = Field(default=5.0, gt=0, le=30)
    webhook_sends_per_tenant: int = Field(default=4, ge=1, le=64)
    webhook_max_attempts: int = Field(default=8, ge=1, le=20)
    webhook_retry_base_seconds: float = Field(default=5.0, gt=0, le=3600)
    webhook_poll_seconds: float = Field(default=1.0, gt=0, le=60)

    @field_validator("stream_ice_urls", "stream_server_ice_urls")
    @classmethod
    def _ice_urls(cls, values: list[str] | None) -> list[str] | None:
        for url in values or []:
            if not url.startswith(("stun:", "turn:", "turns:")):
                raise ValueError(f"an ICE server URL starts stun:, turn: or turns:, not {url!r}")
        return values

    @field_validator("stream_peer_url")
    @classmethod
    def _peer_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (raises on a port that is no number)
        except ValueError:
            parts = None
        if parts is None or not parts.hostname:
            raise ValueError(
                f"FACEGATE_STREAM_PEER_URL {url!r} is no http(s)://HOST[:PORT] address "
                "(an IPv6 address goes in brackets: http://[fd00::1]:8000)"
            )
        return url

    @model_validator(mode="after")
    def _turn_secret(self) -> Settings:
        urls = [*self.stream_ice_urls, *(self.stream_server_ice_urls or [])]
        secret = self.stream_turn_secret
        if any(url.startswith("turn") for url in urls) and secret is None:
            raise ValueError(
                "a turn: or turns: URL in FACEGATE_STREAM_ICE_URLS or "
                "FACEGATE_STREAM_SERVER_ICE_URLS needs FACEGATE_STREAM_TURN_SECRET (the TURN "
                "server's static-auth-secret)"
            )
        if secret is not None and len(secret.get_secret_value()) < 16:
            raise ValueError("FACEGATE_STREAM_TURN_SECRET must be at least 16 characters")
        if self.stream_ice_relay_only and not any(
            url.startswith("turn") for url in self.server_ice_urls
        ):
            raise ValueError(
                "FACEGATE_STREAM_ICE_RELAY_ONLY needs a turn: or turns: URL for the server's side"
            )
        return self

    @property
    def server_ice_urls(self) -> list[str]:
        """The ICE servers the server's side of a stream gathers from."""
        if self.stream_server_ice_urls is None:
            return self.stream_ice_urls
        return self.stream_server_ice_urls

    @field_validator("webhook_allowed_networks")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        parse_allowed(values)  # ValueError names the bad entry
        return values

    def worker_memory_budget(self, uses_device: bool = False) -> int:
        """The memory budget of a worker here (``worker_memory_bytes``, else its default)."""
        if self.worker_memory_bytes is not None:
            return self.worker_memory_bytes
        if uses_device and self.inference_gpu_mem_limit is not None:
            return self.inference_gpu_mem_limit
        return default_memory_budget()

    def job_nice(self, nice: int) -> int:
        """The nice of job workers whose lane asks for ``nice``, in a process that may serve
        live streams: at least ``stream_job_nice`` when it does (streams_per_process > 0),
        so a stream's frames win the CPU from every job; ``nice`` otherwise."""
        return max(nice, self.stream_job_nice) if self.streams_per_process > 0 else nice

    def stream_core_budget(self) -> float:
        """The cores this process's streams may take (``stream_cores``, else its default:
        the process's cores, less one when job workers run beside it, at least
        ``stream_min_cores``)."""
        if self.stream_cores is not None:
            return self.stream_cores
        cores = machine_cores()
        return max(self.stream_min_cores, cores - 1 if self.workers > 0 else cores)

    @property
    def provenance_path(self) -> Path:
        return self.provenance_dir or self.data_dir / "provenance"

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert is not None and self.tls_key is not None

    @property
    def jwt_enabled(self) -> bool:
        has_key = (
            self.jwt_hs_secret is not None
            or self.jwt_public_key is not None
            or self.jwt_public_key_file is not None
            or self.jwt_jwks_file is not None
        )
        return has_key and self.jwt_issuer is not None and self.jwt_audience is not None

    def secret_values(self) -> list[str]:
        """Every secret this configuration holds, for the log redactor: the ``SecretStr``
        fields and the passwords of the connection URLs."""
        found = [
            value.get_secret_value()
            for value in (getattr(self, name) for name in type(self).model_fields)
            if isinstance(value, SecretStr)
        ]
        for url in (self.database_url, self.redis_url, self.storage_url):
            password = urlsplit(url).password if url else None
            if password:
                found += [password, unquote(password)]
        return found


def warmup_list(settings: Settings) -> list[str]:
    return [name.strip() for name in settings.warmup_models.split(",") if name.strip()]


def get_settings(**overrides: object) -> Settings:
    """Build the settings from the environment; ``overrides`` win (CLI flags use this).
    :class:`InvalidSettings` names each bad variable and why."""
    clean = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**clean)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise InvalidSettings(explain_invalid(exc)) from None


def explain_invalid(error: ValidationError) -> str:
    """One line naming each ``FACEGATE_*`` variable pydantic refused, its value (never a
    secret's) and the rule it broke."""
    problems = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        info = Settings.model_fields.get(field)
        secret = info is not None and "SecretStr" in str(info.annotation)
        name = f"FACEGATE_{field.upper()}" if field else "settings"
        value = "" if secret or not field else f"={item['input']!r}"
        problems.append(f"{name}{value}: {item['msg']}")
    return "invalid settings: " + "; ".join(problems)
