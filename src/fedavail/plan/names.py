"""What a config may name, torch-free: the models under `training.model`, and the dataset kind each one reads. The
networks themselves are in fedavail.models (a test keeps both registries the same)."""

MODEL_KINDS = {"fedswe_svhn_cnn": "image", "fedswe_cifar10_cnn": "image", "fedswe_cinic10_cnn": "image",
               "fast_cnn_fmnist": "image", "fast_cnn_cifar10": "image", "fast_char_lstm": "text", "small_cnn": "image"}
MODEL_NAMES = sorted(MODEL_KINDS)
