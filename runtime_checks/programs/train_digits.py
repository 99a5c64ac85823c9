"""A small command-line training script, shaped like a classic MNIST example:
argparse options, DataLoaders, a convolutional net, epochs and logging.

It trains on a synthetic digits-like dataset made on the fly (no download) and
holds one real mistake, the kind `ptlint verify` shows: validate() adds up its
losses as tensors without `torch.no_grad()`, so the running total keeps every
validation batch's autograd graph and activations alive until the epoch's
validation ends (PTL001). Try:

    ptlint verify runtime_checks/programs/train_digits.py -- --epochs 1
"""
import argparse
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

log = logging.getLogger("train_digits")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3)
        self.conv2 = nn.Conv2d(16, 32, 3)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(32 * 6 * 6, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout(torch.flatten(x, 1))
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def synthetic_digits(samples, generator):
    """16x16 images whose class sets the brightness of one of ten stripes."""
    labels = torch.randint(0, 10, (samples,), generator=generator)
    images = torch.randn(samples, 1, 16, 16, generator=generator) * 0.5
    for digit in range(10):
        images[labels == digit, 0, digit, :] += 2.0
    return TensorDataset(images, labels)


def train(args, model, loader, optimizer, epoch):
    model.train()
    for batch, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch % args.log_interval == 0:
            log.info("Train epoch %d [%d/%d] batch %d loss %.4f", epoch, batch * len(data),
                     len(loader.dataset), batch, loss.item())


def validate(args, model, loader):
    model.eval()
    val_loss = 0
    correct = 0
    for batch, (data, target) in enumerate(loader):
        output = model(data)
        val_loss += F.nll_loss(output, target, reduction="sum")
        correct += (output.argmax(dim=1) == target).sum().item()
        if batch % args.log_interval == 0:
            log.info("Validation batch %d running loss %.4f", batch,
                     val_loss.item() / ((batch + 1) * len(data)))
    average = val_loss.item() / len(loader.dataset)
    log.info("Validation: average loss %.4f, accuracy %d/%d (%.1f%%)", average, correct,
             len(loader.dataset), 100.0 * correct / len(loader.dataset))


def main():
    parser = argparse.ArgumentParser(description="Train a small convnet on synthetic digits")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N")
    parser.add_argument("--val-batch-size", type=int, default=64, metavar="N")
    parser.add_argument("--train-samples", type=int, default=2048, metavar="N")
    parser.add_argument("--val-samples", type=int, default=2048, metavar="N")
    parser.add_argument("--epochs", type=int, default=3, metavar="N")
    parser.add_argument("--lr", type=float, default=0.05, metavar="LR")
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=4, metavar="N",
                        help="batches between log lines")
    parser.add_argument("--save-model", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(synthetic_digits(args.train_samples, generator),
                              batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(synthetic_digits(args.val_samples, generator),
                            batch_size=args.val_batch_size)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        train(args, model, train_loader, optimizer, epoch)
        validate(args, model, val_loader)
        log.info("Epoch %d took %.2fs", epoch, time.perf_counter() - start)
    if args.save_model:
        torch.save(model.state_dict(), "digits_cnn.pt")


if __name__ == "__main__":
    main()
