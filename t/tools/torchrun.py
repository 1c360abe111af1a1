# SPDX-License-Identifier: BSD-3-Clause
"""torchrun itself (torch.distributed.run.main), for the tests, on a PyTorch built without libuv.

Debian 13's PyTorch 2.6 builds TCPStore without libuv, yet torchrun's rendezvous constructs its
store with TCPStore's default, use_libuv=True, and stops with "use_libuv was requested but PyTorch
was build without libuv support" (USE_LIBUV=0 does not reach that call). Here TCPStore defaults
to use_libuv=False, before torchrun's modules import it; everything else is torchrun's own code:
its agent, its rendezvous, its store, its workers' variables. Test-only: ctrain never needs it.

    python3 t/tools/torchrun.py [torchrun's arguments...]
"""
import sys

import torch.distributed as dist

_TCPStore = dist.TCPStore


class TCPStore(_TCPStore):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("use_libuv", False)
        super().__init__(*args, **kwargs)


dist.TCPStore = TCPStore

from torch.distributed.run import main  # noqa: E402  (after the patch, on purpose)

if __name__ == "__main__":
    sys.exit(main())
