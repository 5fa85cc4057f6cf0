#!/usr/bin/python3
"""One rank of a torch.distributed (gloo) all-reduce, started by a launcher
that sets torchrun's environment: prints its rank, its node and the sum of
(rank + 1) over all ranks."""

import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("rank %d of %d on node %s: sum %g"
      % (dist.get_rank(), dist.get_world_size(), os.environ["GROUP_RANK"],
         t.item()))
dist.destroy_process_group()
