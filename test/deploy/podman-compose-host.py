# podman-compose for the compose test: Debian bookworm's podman-compose (1.0.3) gives a service
# with `network_mode: host` the project's bridge network as well, which podman refuses; later
# releases give it none. This runs the installed podman-compose with that one function corrected.
import sys

import podman_compose

_net_args = podman_compose.get_net_args


def get_net_args(compose, cnt):
    if cnt.get("network_mode"):
        return []
    return _net_args(compose, cnt)


podman_compose.get_net_args = get_net_args
sys.argv[0] = "podman-compose"
sys.exit(podman_compose.main())
