# src/net: tensors, the layer kinds (layers/, one file per kind; the grouped convolution's
# backward pass in gconv_backward.c), the model builders, networks and the SGD optimiser with
# its learning-rate schedules.
noinst_LIBRARIES += libnet.a
libnet_a_SOURCES = \
	src/net/tensor.c src/net/tensor.h src/net/layer.h \
	src/net/layers/layers_impl.h src/net/layers/act_impl.h src/net/layers/transpose16.h \
	src/net/layers/layer.c \
	src/net/layers/fc.c \
	src/net/layers/gemm.c src/net/layers/im2col.c src/net/layers/conv2d.c \
	src/net/layers/mx_gemm.c src/net/layers/arith_gemm.c \
	src/net/layers/gconv.c src/net/layers/gconv_backward.c src/net/layers/gconv_impl.h \
	src/net/layers/dropout.c src/net/layers/concat.c \
	src/net/layers/linear.c src/net/layers/act.c src/net/layers/pool.c \
	src/net/layers/batchnorm.c src/net/layers/add.c src/net/layers/flatten.c \
	src/net/layers/xent.c \
	src/net/net.c src/net/net.h src/net/models.c \
	src/net/optim.c src/net/optim.h

# the GPU engine (src/net/net_cuda.h): cuDNN/cuBLAS and the engine's own kernels; a stub
# without CUDA
libnet_a_SOURCES += src/net/net_cuda.h src/net/cuda/kernels.h src/net/cuda/kernels_impl.cuh \
	src/net/cuda/engine.h
NET_CUDA_SOURCES = src/net/cuda/net_cuda.cu src/net/cuda/conv_linear.cu src/net/cuda/policy_api.cu \
	src/net/cuda/act.cu src/net/cuda/pool.cu \
	src/net/cuda/batchnorm.cu src/net/cuda/conv.cu src/net/cuda/xent.cu src/net/cuda/optim.cu \
	src/net/cuda/policy.cu
if HAVE_CUDA
libnet_a_SOURCES += $(NET_CUDA_SOURCES)
else
libnet_a_SOURCES += src/net/net_cuda_none.c
endif
EXTRA_DIST += $(NET_CUDA_SOURCES) src/net/net_cuda_none.c
