"""Local HTTP servers that speak the REST APIs loopbreaker's readers call.

The real client libraries are pointed at them (``api_endpoint``, a kubeconfig, a base URL),
so request shapes, status codes and error mapping are exercised for real.
"""

from .base import FakeServer, Fault, Request, Response
from .chat import ChatServer
from .cluster import ClusterServer
from .compute_ops import ComputeOpsServer
from .google import ComputeServer, GkeServer, LoggingServer, ManagedPrometheusProxy
from .kube import KubernetesServer, self_signed_tls, write_kubeconfig
from .slack import SlackServer
from .support import SupportServer

__all__ = [
    "ChatServer",
    "ClusterServer",
    "ComputeOpsServer",
    "ComputeServer",
    "FakeServer",
    "Fault",
    "GkeServer",
    "KubernetesServer",
    "LoggingServer",
    "ManagedPrometheusProxy",
    "Request",
    "Response",
    "SlackServer",
    "SupportServer",
    "self_signed_tls",
    "write_kubeconfig",
]
