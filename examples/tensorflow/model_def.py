"""A Keras model: Stalwart sees the TensorFlow import and picks the TensorFlow image."""

import tensorflow as tf

import stalwart as det


def build_model(units: int) -> tf.keras.Model:
    return tf.keras.Sequential(
        [tf.keras.layers.Dense(units, activation="relu"), tf.keras.layers.Dense(1)]
    )


if __name__ == "__main__":
    info = det.get_cluster_info()
    units = info.trial.hparams["units"] if info else 16
    model = build_model(units)
    model.compile(optimizer="adam", loss="mse")
    x = tf.random.normal((256, 8))
    y = tf.random.normal((256, 1))
    with det.core.init() as core_context:
        history = model.fit(x, y, epochs=3, verbose=0)
        core_context.train.report_validation_metrics(
            steps_completed=3, metrics={"loss": float(history.history["loss"][-1])}
        )
