"""The papers' convolutional networks, written as their layer lists.

FedSWE Table 5 notation: C(in, out) = 3x3 conv, stride 1, padding 1; R = ReLU; M = 2x2 max-pool; L(n) = linear;
D = dropout 0.2. The FAST paper (OpenReview H3AUl3pnlu §5) names its CNNs without layer lists; the fast_* models are
the layer lists of the authors' code (RogerRogerUSC/FAST models/cnn.py).
"""

from torch import nn


def _conv_pool(c_in: int, c_out: int) -> list[nn.Module]:
    """C(in, out)-R-M."""
    return [nn.Conv2d(c_in, c_out, kernel_size=3, stride=1, padding=1), nn.ReLU(), nn.MaxPool2d(2)]


def fedswe_svhn_cnn(in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> nn.Sequential:
    """FedSWE Table 5, SVHN: C(3,32)-R-M-C(32,32)-R-M-L(128)-R-L(10)."""
    return nn.Sequential(*_conv_pool(in_channels, 32), *_conv_pool(32, 32), nn.Flatten(),
                         nn.Linear(32 * (image_size // 4) ** 2, 128), nn.ReLU(), nn.Linear(128, num_classes))


def fedswe_cifar10_cnn(in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> nn.Sequential:
    """FedSWE Table 5, CIFAR-10: C(3,32)-R-M-C(32,32)-R-M-L(256)-R-L(64)-R-L(10)."""
    return nn.Sequential(*_conv_pool(in_channels, 32), *_conv_pool(32, 32),
                         nn.Flatten(), nn.Linear(32 * (image_size // 4) ** 2, 256), nn.ReLU(),
                         nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, num_classes))


def fedswe_cinic10_cnn(in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> nn.Sequential:
    """FedSWE Table 5, CINIC-10: C(3,32)-R-M-C(32,32)-R-M-D-L(512)-R-D-L(256)-R-D-L(10)."""
    return nn.Sequential(*_conv_pool(in_channels, 32), *_conv_pool(32, 32), nn.Dropout(0.2),
                         nn.Flatten(), nn.Linear(32 * (image_size // 4) ** 2, 512), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, num_classes))


# The FAST authors' CNN_FMNIST ends in a 62-way linear layer, the FEMNIST head it was written for; their
# Fashion-MNIST runs used it unchanged, so only the first 10 outputs are ever targets.
FAST_FMNIST_OUTPUTS = 62


def fast_cnn_fmnist(in_channels: int = 1, num_classes: int = 10, image_size: int = 28) -> nn.Sequential:
    """The FAST authors' CNN_FMNIST: C3(1,32)-R-C3(32,64)-R-M-D(0.25)-L(128)-R-D(0.5)-L(62), 3x3 convolutions
    without padding (9216 features at 28x28)."""
    if num_classes > FAST_FMNIST_OUTPUTS:
        raise ValueError(f"fast_cnn_fmnist has {FAST_FMNIST_OUTPUTS} outputs, the dataset has {num_classes} classes")
    side = (image_size - 4) // 2
    return nn.Sequential(
        nn.Conv2d(in_channels, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
        nn.Flatten(), nn.Linear(64 * side * side, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, FAST_FMNIST_OUTPUTS),
    )


def fast_cnn_cifar10(in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> nn.Sequential:
    """The FAST authors' CNN_Cifar10_2: C(3,16)-R-M-C(16,32)-R-M-C(32,64)-R-M-D(0.25)-L(500)-R-D(0.25)-L(10)."""
    return nn.Sequential(*_conv_pool(in_channels, 16), *_conv_pool(16, 32), *_conv_pool(32, 64), nn.Flatten(),
                         nn.Dropout(0.25), nn.Linear(64 * (image_size // 8) ** 2, 500), nn.ReLU(), nn.Dropout(0.25),
                         nn.Linear(500, num_classes))


def small_cnn(in_channels: int = 1, num_classes: int = 10, image_size: int = 28) -> nn.Sequential:
    """A small CNN for the bundled MNIST-5k / digits, sized for minutes on two CPU cores. Strided 5x5 convolutions
    replace max-pooling, which costs a third of a step on CPU: C5s2(1,8)-R-C5s2(8,16)-R-L(64)-R-L(10)."""
    side = -(-image_size // 4)
    return nn.Sequential(
        nn.Conv2d(in_channels, 8, 5, stride=2, padding=2), nn.ReLU(),
        nn.Conv2d(8, 16, 5, stride=2, padding=2), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * side * side, 64), nn.ReLU(), nn.Linear(64, num_classes),
    )
