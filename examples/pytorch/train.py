"""A small PyTorch model trained with the Core API, distributed with torch_distributed."""

import torch
from torch import nn

import stalwart as det


def main(core_context: "det.core.Context", hparams: dict) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, hparams["hidden"]), nn.ReLU(), nn.Linear(hparams["hidden"], 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=hparams["lr"])
    data, target = torch.randn(256, 8), torch.randn(256, 1)
    for step in range(1, 201):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            core_context.train.report_validation_metrics(
                steps_completed=step, metrics={"validation_loss": loss.item()}
            )


if __name__ == "__main__":
    info = det.get_cluster_info()
    hparams = info.trial.hparams if info else {"hidden": 16, "lr": 0.05}
    with det.core.init() as core_context:
        main(core_context, hparams)
