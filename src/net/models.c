/* src/net/models.c: the models of doc/models.md, with PyTorch module names.
 *
 * LeNet-5 and AlexNet are named as the same model written as one
 * nn.Sequential (state_dict keys "0.weight", "3.bias", ...; index numbers
 * count every module, Flatten included). ResNet-20 uses the usual CIFAR
 * ResNet names: conv1, bn1, layer{1,2,3}.{0,1,2}.{conv1,bn1,conv2,bn2},
 * layer{2,3}.0.shortcut.{0,1} (1x1 projection conv + batch-norm) and linear.
 *
 * References: LeCun et al. 1998 (LeNet-5, tanh + average pooling variant);
 * the AdaPT reference repository's CIFAR AlexNet; He et al. 2016 (ResNet-20
 * for CIFAR, projection shortcuts, "option B").
 */
#include <stdio.h>
#include <string.h>

#include "src/net/net.h"

#define ADD1(net, layer, in) adapt_net_add((net), (layer), (in), -1)

static const int *dim(struct adapt_net *net, int a) { return adapt_net_act_dim(net, a); }

static struct adapt_net *build_lenet5(int classes)
{
    int in[3] = {1, 32, 32};
    struct adapt_net *net = adapt_net_alloc("lenet5", in, classes);
    if (!net) return NULL;
    int a = 0;
    a = ADD1(net, adapt_conv2d_create("0", dim(net, a), 6, 5, 1, 0, 1), a);
    if (a >= 0) a = ADD1(net, adapt_tanh_create("1", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_avgpool2d_create("2", dim(net, a), 2, 2), a);
    if (a >= 0) a = ADD1(net, adapt_conv2d_create("3", dim(net, a), 16, 5, 1, 0, 1), a);
    if (a >= 0) a = ADD1(net, adapt_tanh_create("4", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_avgpool2d_create("5", dim(net, a), 2, 2), a);
    if (a >= 0) a = ADD1(net, adapt_conv2d_create("6", dim(net, a), 120, 5, 1, 0, 1), a);
    if (a >= 0) a = ADD1(net, adapt_tanh_create("7", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_flatten_create("8", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_linear_create("9", dim(net, a), 84, 1), a);
    if (a >= 0) a = ADD1(net, adapt_tanh_create("10", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_linear_create("11", dim(net, a), classes, 1), a);
    if (a < 0) {
        adapt_net_free(net);
        return NULL;
    }
    return net;
}

static struct adapt_net *build_alexnet(const char *name, int cin, int classes)
{
    int in[3] = {cin, 32, 32};
    struct adapt_net *net = adapt_net_alloc(name, in, classes);
    if (!net) return NULL;
    int a = 0;
    a = ADD1(net, adapt_conv2d_create("0", dim(net, a), 64, 11, 4, 5, 1), a);
    if (a >= 0) a = ADD1(net, adapt_relu_create("1", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_maxpool2d_create("2", dim(net, a), 2, 2), a);
    if (a >= 0) a = ADD1(net, adapt_conv2d_create("3", dim(net, a), 192, 5, 1, 2, 1), a);
    if (a >= 0) a = ADD1(net, adapt_relu_create("4", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_maxpool2d_create("5", dim(net, a), 2, 2), a);
    if (a >= 0) a = ADD1(net, adapt_conv2d_create("6", dim(net, a), 384, 3, 1, 1, 1), a);
    if (a >= 0) a = ADD1(net, adapt_relu_create("7", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_conv2d_create("8", dim(net, a), 256, 3, 1, 1, 1), a);
    if (a >= 0) a = ADD1(net, adapt_relu_create("9", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_conv2d_create("10", dim(net, a), 256, 3, 1, 1, 1), a);
    if (a >= 0) a = ADD1(net, adapt_relu_create("11", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_maxpool2d_create("12", dim(net, a), 2, 2), a);
    if (a >= 0) a = ADD1(net, adapt_flatten_create("13", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_linear_create("14", dim(net, a), classes, 1), a);
    if (a < 0) {
        adapt_net_free(net);
        return NULL;
    }
    return net;
}

/* conv3x3 (no bias) + batch-norm [+ relu]; returns the activation id. */
static int conv_bn(struct adapt_net *net, int a, const char *prefix, const char *conv,
                   const char *bn, int cout, int k, int stride, int relu_after, const char *relu)
{
    char n1[ADAPT_NAME_MAX], n2[ADAPT_NAME_MAX];
    snprintf(n1, sizeof n1, "%s%s", prefix, conv);
    snprintf(n2, sizeof n2, "%s%s", prefix, bn);
    a = ADD1(net, adapt_conv2d_create(n1, dim(net, a), cout, k, stride, k / 2, 0), a);
    if (a >= 0) a = ADD1(net, adapt_batchnorm2d_create(n2, dim(net, a), 1e-5f, 0.1f), a);
    if (a >= 0 && relu_after) {
        snprintf(n1, sizeof n1, "%s%s", prefix, relu);
        a = ADD1(net, adapt_relu_create(n1, dim(net, a)), a);
    }
    return a;
}

static int basic_block(struct adapt_net *net, int a, int stage, int idx, int cout, int stride)
{
    char p[24], n[ADAPT_NAME_MAX];
    snprintf(p, sizeof p, "layer%d.%d.", stage, idx);
    int x = a;
    int b = conv_bn(net, x, p, "conv1", "bn1", cout, 3, stride, 1, "relu1");
    if (b >= 0) b = conv_bn(net, b, p, "conv2", "bn2", cout, 3, 1, 0, NULL);
    int s = x;
    if (b >= 0 && (stride != 1 || dim(net, x)[0] != cout))
        s = conv_bn(net, x, p, "shortcut.0", "shortcut.1", cout, 1, stride, 0, NULL);
    if (b < 0 || s < 0) return -1;
    snprintf(n, sizeof n, "%sadd", p);
    int y = adapt_net_add(net, adapt_add_create(n, dim(net, b)), b, s);
    if (y < 0) return -1;
    snprintf(n, sizeof n, "%srelu2", p);
    return ADD1(net, adapt_relu_create(n, dim(net, y)), y);
}

static struct adapt_net *build_resnet20(int classes)
{
    int in[3] = {3, 32, 32};
    struct adapt_net *net = adapt_net_alloc("resnet20", in, classes);
    if (!net) return NULL;
    int a = conv_bn(net, 0, "", "conv1", "bn1", 16, 3, 1, 1, "relu");
    static const int width[3] = {16, 32, 64};
    for (int s = 0; s < 3 && a >= 0; s++)
        for (int b = 0; b < 3 && a >= 0; b++)
            a = basic_block(net, a, s + 1, b, width[s], (s > 0 && b == 0) ? 2 : 1);
    if (a >= 0) a = ADD1(net, adapt_avgpool2d_create("avgpool", dim(net, a), 0, 0), a);
    if (a >= 0) a = ADD1(net, adapt_flatten_create("flatten", dim(net, a)), a);
    if (a >= 0) a = ADD1(net, adapt_linear_create("linear", dim(net, a), classes, 1), a);
    if (a < 0) {
        adapt_net_free(net);
        return NULL;
    }
    return net;
}

int adapt_model_in_channels(const char *name)
{
    if (!strcmp(name, "lenet5") || !strcmp(name, "alexnet_mnist")) return 1;
    if (!strcmp(name, "alexnet_cifar") || !strcmp(name, "resnet20")) return 3;
    return 0;
}

struct adapt_net *adapt_model_build(const char *name, int classes)
{
    if (classes < 2) {
        ADAPT_ERROR(ADAPT_EINVAL, "model %s: need at least 2 classes, got %d", name, classes);
        return NULL;
    }
    if (!strcmp(name, "lenet5")) return build_lenet5(classes);
    if (!strcmp(name, "alexnet_cifar")) return build_alexnet(name, 3, classes);
    if (!strcmp(name, "alexnet_mnist")) return build_alexnet(name, 1, classes);
    if (!strcmp(name, "resnet20")) return build_resnet20(classes);
    ADAPT_ERROR(ADAPT_EINVAL,
                "unknown model '%s' (expected lenet5, alexnet_cifar, alexnet_mnist or resnet20)",
                name);
    return NULL;
}
