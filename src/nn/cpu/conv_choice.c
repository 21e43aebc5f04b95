#include "nn/cpu/conv_choice.h"

#include <string.h>

#include "nn/cpu/conv_onednn.h"
#include "nn/cpu/nn_cpu.h"

const nn_backend *nn_cpu_conv(const char *conv)
{
    if (strcmp(conv, "im2col") == 0)
        return &nn_cpu;
    int automatic = strcmp(conv, "auto") == 0;
    int winograd = automatic || strcmp(conv, "wino43") == 0 ? WINO_OWN
                   : strcmp(conv, "winograd") == 0          ? WINO_ONEDNN
                                                            : WINO_NONE;
    if (!winograd && strcmp(conv, "onednn") != 0)
        return NULL;
    const nn_backend *onednn = nn_cpu_onednn(winograd);
    return onednn || !automatic ? onednn : &nn_cpu;
}
