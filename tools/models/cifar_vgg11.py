"""cifar_vgg11.py: VGG-11 with batch norm for CIFAR-10's 32x32 images, the
network UW-Madison's CS744 (assignment 2) trains, for tools/profile_model.py
(worker/profiles/vgg11.json: `profile_model.py tools/models/cifar_vgg11.py:VGG11
--input 3,32,32 --batch 64`).

Configuration "A" of Simonyan & Zisserman (8 convolutions of 3x3, five
max-pools) as the CIFAR variants write it: every convolution padded by 1
and followed by a batch norm and a ReLU, the 512 features of the last 1x1
map read by one Linear into 10 classes (no 4096-wide classifier), module
indices as nn.Sequential numbers them: 9,231,114 parameters."""
import torch.nn as nn

CONFIG_A = [64, "pool", 128, "pool", 256, 256, "pool", 512, 512, "pool", 512, 512, "pool"]


class VGG11(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        layers, channels = [], 3
        for width in CONFIG_A:
            if width == "pool":
                layers.append(nn.MaxPool2d(2, 2))
                continue
            layers += [nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width),
                       nn.ReLU(inplace=True)]
            channels = width
        layers.append(nn.AvgPool2d(1, 1))  # a no-op at 1x1 that keeps the indices of the CIFAR code
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(512, classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))
