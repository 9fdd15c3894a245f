"""What a config may name, torch-free: the datasets (fedavail.data prepares them) and the models under
`training.model`, with the dataset kind each one reads (the networks themselves are in fedavail.models; a test keeps
both registries the same)."""

BUNDLED_DATASETS = ("mnist5k", "digits", "shakespeare")
PAPER_DATASETS = ("fashion_mnist", "cifar10", "svhn", "cinic10", "shakespeare_leaf", "shakespeare_leaf_json")
DATASETS = BUNDLED_DATASETS + PAPER_DATASETS

MODEL_KINDS = {"fedswe_svhn_cnn": "image", "fedswe_cifar10_cnn": "image", "fedswe_cinic10_cnn": "image",
               "fast_cnn_fmnist": "image", "fast_cnn_cifar10": "image", "fast_char_lstm": "text", "small_cnn": "image"}
MODEL_NAMES = sorted(MODEL_KINDS)
