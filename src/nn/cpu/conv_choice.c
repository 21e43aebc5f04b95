#include "nn/cpu/conv_choice.h"

#include <string.h>

#include "nn/cpu/conv_onednn.h"
#include "nn/cpu/nn_cpu.h"

const nn_backend *nn_cpu_conv(const char *conv)
{
    if (strcmp(conv, "im2col") == 0)
        return &nn_cpu;
    int automatic = strcmp(conv, "auto") == 0, winograd = automatic || strcmp(conv, "winograd") == 0;
    if (!winograd && strcmp(conv, "onednn") != 0)
        return NULL;
    const nn_backend *onednn = nn_cpu_onednn(winograd);
    return onednn || !automatic ? onednn : &nn_cpu;
}
