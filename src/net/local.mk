# src/net: tensors, the layer kinds (layers/, one file per kind), the model builders, networks
# and the SGD optimiser with its learning-rate schedules.
noinst_LIBRARIES += libnet.a
libnet_a_SOURCES = \
	src/net/tensor.c src/net/tensor.h src/net/layer.h \
	src/net/layers/layers_impl.h src/net/layers/layer.c src/net/layers/fc.c \
	src/net/layers/gemm.c src/net/layers/im2col.c src/net/layers/conv2d.c \
	src/net/layers/gconv.c src/net/layers/dropout.c \
	src/net/layers/linear.c src/net/layers/act.c src/net/layers/pool.c \
	src/net/layers/batchnorm.c src/net/layers/add.c src/net/layers/flatten.c \
	src/net/layers/xent.c \
	src/net/net.c src/net/net.h src/net/models.c \
	src/net/optim.c src/net/optim.h
