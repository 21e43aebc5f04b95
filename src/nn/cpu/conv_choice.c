#include "nn/cpu/conv_choice.h"

#include <string.h>

#include "nn/cpu/conv_onednn.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/cpu/wino43.h"
#include "nn/cpu/wino43_stack.h"

const nn_backend *nn_cpu_own(void)
{
    static nn_backend b;
    if (!b.name) {
        b = nn_cpu;
        b.conv_stack_forward = wino43_stack_forward;
        b.conv_stack_backward = wino43_stack_backward;
    }
    return &b;
}

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
    if (onednn || winograd != WINO_OWN)
        return onednn;
    return !automatic || wino43_has_cpu() ? nn_cpu_own() : &nn_cpu;
}
