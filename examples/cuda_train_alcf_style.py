"""A DDP training script written for NVIDIA GPUs, in the style of ALCF's "hello DDP" example.

This is the "before" picture of notebook 02: every CUDA-specific line that ``hpcprof-kit port``
rewrites for Intel GPUs (XPU) is here. It runs as it is only where CUDA is present:

    mpiexec -n 4 --ppn 4 python cuda_train_alcf_style.py
"""

import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

# Ranks from the MPI launcher (PALS / Hydra set PMI_*)
RANK = int(os.environ["PMI_RANK"])
SIZE = int(os.environ["PMI_SIZE"])
LOCAL_RANK = int(os.environ.get("PMI_LOCAL_RANK", RANK % torch.cuda.device_count()))
os.environ["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "0,1,2,3")

os.environ["MASTER_ADDR"] = socket.gethostname() if RANK == 0 else os.environ["MASTER_ADDR"]
os.environ["MASTER_PORT"] = "29500"  # fixed port: clashes when two jobs share a node

torch.backends.cudnn.benchmark = True  # cuDNN autotuner
torch.cuda.set_device(LOCAL_RANK)
dist.init_process_group(backend="nccl", init_method="env://", rank=RANK, world_size=SIZE)
device = torch.device(f"cuda:{LOCAL_RANK}")

torch.manual_seed(0)
src = torch.rand((2048, 10, 512))  # (samples, sequence, features)
tgt = torch.rand((2048, 20, 512))
dataset = TensorDataset(src, tgt)
sampler = DistributedSampler(dataset, num_replicas=SIZE, rank=RANK, shuffle=True)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)

model = torch.nn.Transformer(nhead=16, num_encoder_layers=12, batch_first=True).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001 * SIZE)
model = DDP(model, device_ids=[LOCAL_RANK])
criterion = torch.nn.MSELoss()
scaler = torch.cuda.amp.GradScaler()

activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
    for epoch in range(10):
        sampler.set_epoch(epoch)
        for source, targets in loader:
            source, targets = source.to("cuda"), targets.cuda()
            optimizer.zero_grad()
            with torch.cuda.amp.autocast():
                loss = criterion(model(source, targets), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            torch.cuda.synchronize()
            prof.step()
        if RANK == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}, "
                  f"memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")

if RANK == 0:
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=10))
dist.destroy_process_group()
