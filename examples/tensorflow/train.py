"""A Keras model trained with the Core API: metrics, checkpoints and preemption in a callback.

The model learns whether a point of the square [-1, 1]^2 lies inside a circle, from points made
on the spot (nothing is downloaded). :class:`StalwartCallback` does the Core API's part at the
end of every epoch: it reports the epoch's metrics, stores the weights as a checkpoint, and stops
training when Stalwart asks (a pause, or a searcher ending the trial); a trial that starts again
resumes from its latest checkpoint.

It needs TensorFlow, so the task must run in the TensorFlow image: ``const.yaml`` pins it, and
``unpinned.yaml`` shows Stalwart picking it by itself. Off-cluster, ``python3 train.py`` trains
once with ``DEFAULT_HPARAMS``.
"""

import json
import math
from typing import Any

import numpy as np
import tensorflow as tf

import stalwart as det

DEFAULT_HPARAMS: dict[str, Any] = {
    "units": 32,
    "learning_rate": 0.01,
    "batch_size": 32,
    "epochs": 5,
}
TRAIN_SIZE, VALIDATION_SIZE = 4000, 1000


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of [-1, 1]^2, and 1 for those inside the circle of radius 0.7, else 0."""
    rng = np.random.default_rng(seed)
    points = rng.uniform(-1.0, 1.0, size=(n, 2)).astype("float32")
    labels = ((points**2).sum(axis=1) < 0.49).astype("float32")
    return points, labels


def build_model(hparams: dict[str, Any]) -> tf.keras.Model:
    model = tf.keras.Sequential(
        [
            tf.keras.Input(shape=(2,)),
            tf.keras.layers.Dense(int(hparams["units"]), activation="relu"),
            tf.keras.layers.Dense(int(hparams["units"]), activation="relu"),
            tf.keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=float(hparams["learning_rate"])),
        loss="binary_crossentropy",
        metrics=["accuracy"],
    )
    return model


class StalwartCallback(tf.keras.callbacks.Callback):
    """Reports each epoch's metrics, checkpoints, and stops training when asked to."""

    def __init__(self, core_context: det.core.Context, batches_per_epoch: int) -> None:
        super().__init__()
        self.core_context = core_context
        self.batches_per_epoch = batches_per_epoch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        logs = logs or {}
        epochs_completed = epoch + 1
        batches = epochs_completed * self.batches_per_epoch
        train = self.core_context.train
        train.report_training_metrics(
            steps_completed=batches,
            metrics={"loss": float(logs["loss"]), "accuracy": float(logs["accuracy"])},
        )
        train.report_validation_metrics(
            steps_completed=batches,
            metrics={
                "validation_loss": float(logs["val_loss"]),
                "validation_accuracy": float(logs["val_accuracy"]),
                "epochs": epochs_completed,
            },
        )
        with self.core_context.checkpoint.store_path({"steps_completed": batches}) as (path, _):
            self.model.save_weights(str(path / "model.weights.h5"))
            (path / "state.json").write_text(json.dumps({"epochs": epochs_completed}))
        if self.core_context.preempt.should_preempt():
            self.model.stop_training = True  # fit() returns after this epoch


def main(
    core_context: det.core.Context, hparams: dict[str, Any], latest_checkpoint: str | None
) -> None:
    model = build_model(hparams)
    initial_epoch = 0
    if latest_checkpoint is not None:
        # Resume: the weights and the epoch (the optimizer starts afresh: save the whole model
        # with `model.save(path / "model.keras")` to keep its state too).
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            model.load_weights(str(path / "model.weights.h5"))
            initial_epoch = json.loads((path / "state.json").read_text())["epochs"]
    x, y = make_data(TRAIN_SIZE, seed=0)
    validation = make_data(VALIDATION_SIZE, seed=1)
    batch_size = int(hparams["batch_size"])
    callback = StalwartCallback(core_context, batches_per_epoch=math.ceil(TRAIN_SIZE / batch_size))
    model.fit(
        x,
        y,
        batch_size=batch_size,
        epochs=int(hparams["epochs"]),
        initial_epoch=initial_epoch,  # resume where the checkpoint left off
        validation_data=validation,
        callbacks=[callback],
        verbose=2,
    )


if __name__ == "__main__":
    info = det.get_cluster_info()
    if info is not None:
        hparams, latest_checkpoint = info.trial.hparams, info.latest_checkpoint
    else:
        hparams, latest_checkpoint = DEFAULT_HPARAMS, None
    with det.core.init() as core_context:
        main(core_context, hparams, latest_checkpoint)
