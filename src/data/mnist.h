/* The data set's geometry, in one place: 28x28 uint8 images, labels 0..9. */
#ifndef MNIST_MNIST_H
#define MNIST_MNIST_H

enum { MNIST_ROWS = 28, MNIST_COLS = 28, MNIST_PIXELS = MNIST_ROWS * MNIST_COLS, MNIST_CLASSES = 10 };
#endif
