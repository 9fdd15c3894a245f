"""The papers' convolutional networks, written as their layer lists.

FedSWE Table 5 notation: C(in, out) = 3x3 conv, stride 1, padding 1; R = ReLU; M = 2x2 max-pool; L(n) = linear;
D = dropout 0.2. FAST (OpenReview H3AUl3pnlu §5) names CNNs without layer lists; each model documents its choices.
"""

from torch import nn


def _conv(c_in: int, c_out: int, kernel: int = 3) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, kernel_size=kernel, stride=1, padding=kernel // 2)


def fedswe_svhn_cnn(in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> nn.Sequential:
    """FedSWE Table 5, SVHN: C(3,32)-R-M-C(32,32)-R-M-L(128)-R-L(10)."""
    flat = 32 * (image_size // 4) ** 2
    return nn.Sequential(
        _conv(in_channels, 32), nn.ReLU(), nn.MaxPool2d(2),
        _conv(32, 32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(flat, 128), nn.ReLU(), nn.Linear(128, num_classes),
    )


def fedswe_cifar10_cnn(in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> nn.Sequential:
    """FedSWE Table 5, CIFAR-10: C(3,32)-R-M-C(32,32)-R-M-L(256)-R-L(64)-R-L(10)."""
    flat = 32 * (image_size // 4) ** 2
    return nn.Sequential(
        _conv(in_channels, 32), nn.ReLU(), nn.MaxPool2d(2),
        _conv(32, 32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(flat, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, num_classes),
    )


def fedswe_cinic10_cnn(in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> nn.Sequential:
    """FedSWE Table 5, CINIC-10: C(3,32)-R-M-C(32,32)-R-M-D-L(512)-R-D-L(256)-R-D-L(10)."""
    flat = 32 * (image_size // 4) ** 2
    return nn.Sequential(
        _conv(in_channels, 32), nn.ReLU(), nn.MaxPool2d(2),
        _conv(32, 32), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.2),
        nn.Flatten(), nn.Linear(flat, 512), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, num_classes),
    )


def fast_fmnist_cnn(in_channels: int = 1, num_classes: int = 10, image_size: int = 28) -> nn.Sequential:
    """FAST's Fashion-MNIST CNN. The text gives no layers; this is the FedAvg (McMahan et al.) MNIST CNN:
    C5(1,32)-R-M-C5(32,64)-R-M-L(512)-R-L(10), 5x5 kernels with padding 2."""
    flat = 64 * (image_size // 4) ** 2
    return nn.Sequential(
        _conv(in_channels, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        _conv(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(flat, 512), nn.ReLU(), nn.Linear(512, num_classes),
    )


def fast_cifar10_cnn(in_channels: int = 3, num_classes: int = 10, image_size: int = 32) -> nn.Sequential:
    """FAST's CIFAR-10 CNN. The text gives no layers; this is the LeNet-5-style CNN common in FL benchmarks:
    C5(3,6)-R-M-C5(6,16)-R-M-L(120)-R-L(84)-R-L(10), 5x5 kernels without padding."""
    side = ((image_size - 4) // 2 - 4) // 2
    return nn.Sequential(
        nn.Conv2d(in_channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * side * side, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, num_classes),
    )


def small_cnn(in_channels: int = 1, num_classes: int = 10, image_size: int = 28) -> nn.Sequential:
    """A small CNN for the bundled MNIST-5k / digits, sized for minutes on two CPU cores. Strided 5x5 convolutions
    replace max-pooling, which costs a third of a step on CPU: C5s2(1,8)-R-C5s2(8,16)-R-L(64)-R-L(10)."""
    side = -(-image_size // 4)
    return nn.Sequential(
        nn.Conv2d(in_channels, 8, 5, stride=2, padding=2), nn.ReLU(),
        nn.Conv2d(8, 16, 5, stride=2, padding=2), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * side * side, 64), nn.ReLU(), nn.Linear(64, num_classes),
    )
