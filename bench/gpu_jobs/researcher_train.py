"""A small real training script, as a researcher writes one: DataLoader workers, tqdm bars,
metrics.json at the end, a traceback when the loss diverges."""
import argparse
import json
import os

import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, required=True)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--epochs", type=int, default=3)
a = p.parse_args()
torch.manual_seed(a.seed)
X = torch.randn(40000, 512)
y = (X[:, :8].sum(1) > 0).long()
train = DataLoader(TensorDataset(X[:32000], y[:32000]), batch_size=256, shuffle=True,
                   num_workers=2, persistent_workers=True)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(),
                            torch.nn.Linear(2048, 2)).cuda()
ballast = torch.empty(3 * 2**30, dtype=torch.uint8, device="cuda")  # a bigger model's weights
opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
Xv, yv = X[32000:].cuda(), y[32000:].cuda()
for epoch in range(a.epochs):
    for xb, yb in tqdm(train, desc=f"epoch {epoch}"):
        xb, yb = xb.cuda(non_blocking=True), yb.cuda(non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        if not torch.isfinite(loss):
            raise ValueError(f"loss is nan at epoch {epoch}")
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model(Xv).argmax(1) == yv).float().mean().item()
    print(f"epoch={epoch} loss={loss.item():.4f} val_acc={acc:.4f}", flush=True)
with open(os.path.join(os.environ["EQ_ATTEMPT_DIR"], "metrics.json"), "w") as f:
    json.dump({"val_acc": acc, "loss": loss.item()}, f)
