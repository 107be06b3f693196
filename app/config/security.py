"""``server.tls`` (HTTPS, optional client certificates) and ``auth`` (REST API bearer tokens).

The extender verbs are never behind ``auth``: kube-scheduler sends no bearer token to an
extender. Protect them with TLS (``server.tls``, and ``requireClientCert`` for mutual TLS).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from app.config.durations import Duration
from app.config.section import Section

# Long enough that guessing is hopeless; `openssl rand -hex 32` gives 64 characters.
MIN_STATIC_TOKEN_LENGTH = 16


class TLSConfig(Section):
    """HTTPS for every endpoint (verbs, REST, probes, metrics). Off unless ``certFile`` is set.

    The files are re-read when they change (a rotated cert-manager Secret is picked up without a
    restart); the check runs on new connections, at most once per ``reloadInterval``.
    """

    cert_file: str | None = Field(
        None,
        description="PEM certificate chain (server certificate first), e.g. a Secret's `tls.crt`. "
        "Setting it turns HTTPS on; `serve --tls-cert-file` overrides it.",
    )
    key_file: str | None = Field(
        None,
        description="PEM private key of `certFile`, e.g. a Secret's `tls.key` "
        "(`serve --tls-key-file` overrides it).",
    )
    client_ca_file: str | None = Field(
        None,
        alias="clientCAFile",
        description="PEM bundle of the CAs whose client certificates are accepted. Alone, a "
        "client certificate is verified when one is presented; with `requireClientCert` every "
        "connection must present one.",
    )
    require_client_cert: bool = Field(
        False,
        description="Refuse connections without a client certificate signed by `clientCAFile` "
        "(mutual TLS). kubelet's httpGet probes present none: probe `server.healthPort` then.",
    )
    reload_interval: Duration = Field(
        10.0,
        ge=0,
        description="How often (at most) a new connection checks the files for changes. "
        "`0s` = on every new connection.",
    )
    min_version: Literal["1.2", "1.3"] = Field("1.2", description="Lowest TLS version accepted.")

    @property
    def enabled(self) -> bool:
        """Whether runway serves HTTPS."""
        return self.cert_file is not None

    @model_validator(mode="after")
    def _complete(self) -> TLSConfig:
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("keyFile is set but certFile is not: set both to serve HTTPS")
        if self.client_ca_file is not None and self.cert_file is None:
            raise ValueError(
                "clientCAFile needs HTTPS: set certFile (and keyFile) to verify client certificates"
            )
        if self.require_client_cert and self.client_ca_file is None:
            raise ValueError(
                "requireClientCert needs clientCAFile, the CA bundle client certificates are "
                "verified against"
            )
        return self


class SubjectAccessReviewConfig(Section):
    """What a caller must be allowed to do (RBAC), asked with a SubjectAccessReview.

    Mutating endpoints ask ``verb``; read-only ``/v1`` GETs (with ``protectReadOnly``) ask
    ``readVerb`` on the same resource; ``/metrics`` (with ``protectMetrics``) asks
    ``get`` on the non-resource URL ``/metrics``, like kube-rbac-proxy.
    """

    verb: str = Field("update", min_length=1, description="Verb required by mutating endpoints.")
    read_verb: str = Field("get", min_length=1, description="Verb required by read-only endpoints.")
    group: str = Field("runway.dev", description="API group of the RBAC resource.")
    resource: str = Field("workloads", min_length=1, description="RBAC resource (plural).")


class FailureLimitConfig(Section):
    """How many failed token checks one source may cause (``kubernetes`` mode): each is a
    TokenReview runway sends the API server on the caller's word, so made-up tokens must not
    turn runway into an amplifier. Once a source's bucket is empty, a token runway does not
    know is answered 429 (``Retry-After``) without a review; tokens it knows (cached) pass."""

    burst: int = Field(20, ge=1, description="Failed checks a source may cause in a row.")
    per_second: float = Field(
        1.0, gt=0, description="Failed checks a source earns back per second."
    )


class AuthConfig(Section):
    """Bearer-token authentication of the REST API (``/v1/...``) and optionally ``/metrics``."""

    mode: Literal["auto", "none", "static", "kubernetes"] = Field(
        "auto",
        description="`static`: tokens from `staticTokens`/`staticTokenFile`. `kubernetes`: "
        "TokenReview + SubjectAccessReview against the API server. `none`: no check (log a "
        "warning when bound beyond loopback). `auto`: `static` when tokens are configured, else "
        "`kubernetes` when a cluster is configured, else `none`.",
    )
    static_tokens: list[SecretStr] = Field(
        default_factory=list,
        description="Accepted bearer tokens (at least 16 characters each; shown as `**********` "
        "when the config is printed). Prefer `staticTokenFile` from a Secret over tokens in a "
        "ConfigMap.",
    )
    static_token_file: str | None = Field(
        None,
        description="File of accepted tokens, one per line as `token[,user[,...]]` (the "
        "kube-apiserver token-file layout; `#` lines ignored). Re-read when it changes.",
    )
    protect_read_only: bool = Field(
        False, description="Also require a token on read-only `/v1/...` GET endpoints."
    )
    protect_metrics: bool = Field(False, description="Also require a token on `/metrics`.")
    sar: SubjectAccessReviewConfig = Field(
        default_factory=SubjectAccessReviewConfig,
        description="The permission checked in `kubernetes` mode.",
    )
    audiences: list[str] = Field(
        default_factory=list,
        description="TokenReview audiences (`kubernetes` mode); empty = the API server's.",
    )
    cache_ttl: Duration = Field(
        10.0,
        alias="cacheTTL",
        ge=0,
        description="How long an accepted token/permission is remembered (`kubernetes` mode). "
        "`0s` = ask every time.",
    )
    negative_cache_ttl: Duration = Field(
        5.0,
        alias="negativeCacheTTL",
        ge=0,
        description="How long a rejected token or a denied permission is remembered "
        "(`kubernetes` mode): a grant takes effect within it. `0s` = ask every time.",
    )
    failure_limit: FailureLimitConfig = Field(
        default_factory=FailureLimitConfig,
        description="Failed token checks (rejected, or the API server unavailable) per source "
        "address (`kubernetes` mode); behind the API server's service proxy every caller "
        "shares its address.",
    )

    @field_validator("static_tokens")
    @classmethod
    def _long_enough(cls, tokens: list[SecretStr]) -> list[SecretStr]:
        for i, secret in enumerate(tokens):
            token = secret.get_secret_value()
            if len(token.strip()) < MIN_STATIC_TOKEN_LENGTH or token != token.strip():
                raise ValueError(
                    f"token #{i} is shorter than {MIN_STATIC_TOKEN_LENGTH} characters or has "
                    "surrounding spaces; generate one with `openssl rand -hex 32`"
                )
        return tokens

    @model_validator(mode="after")
    def _static_has_tokens(self) -> AuthConfig:
        if self.mode == "static" and not self.static_tokens and self.static_token_file is None:
            raise ValueError(
                "mode static needs staticTokens or staticTokenFile (no token could ever match)"
            )
        return self
