"""Typed errors that users see; the CLI prints them without a traceback.

Internal invariants use `assert`; anything a user's input can trigger raises one of these.
"""


class PlannerError(Exception):
    """Base class for errors reported to the user as a one-line message."""


class CatalogError(PlannerError):
    """Unknown model or hardware id, or a catalog/HF file that does not describe a model."""


class PrecisionError(PlannerError):
    """A precision the hardware cannot run (e.g. NVFP4 on Hopper)."""


class DeploymentError(PlannerError):
    """Parallelism that does not fit the model or the GPUs (e.g. ep larger than the instance)."""


class NoNetworkError(DeploymentError):
    """GPUs that must talk across nodes of a system with no network between them (no NIC in the catalog)."""


class InsufficientMemoryError(PlannerError):
    """The weights and buffers do not fit; the message says by how much."""


class KVCacheCapacityError(PlannerError):
    """The KV pool cannot hold the requested batch at the requested context length."""


class MissingKernelDataError(PlannerError):
    """No kernel path or efficiency prior exists for this op on this architecture."""
