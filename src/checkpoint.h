/* Model files: HDF5 with one float32 dataset per tensor, named and shaped like the PyTorch state_dict
 * ("conv1.weight" [32,1,3,3], ...), so h5py + torch.load_state_dict read them directly. */
#ifndef MNIST_CHECKPOINT_H
#define MNIST_CHECKPOINT_H
#include "model.h"

/* Fails early (73) if PATH's directory cannot take the file, before hours of training. Collective. */
void checkpoint_check_writable(const char *option, const char *path);
/* Written to PATH.tmp.PID and renamed: a crash never leaves a file that looks complete. */
void checkpoint_save_model(const char *path, model *m, int epoch, double test_accuracy);
/* Dies 66 if missing, 65 if it is not a model file or holds another model / other shapes. */
void checkpoint_load_model(const char *path, model *m);
#endif
