# m4/adapt_cuda.m4: ADAPT_CHECK_CUDA
#
# --with-cuda[=DIR]   use the CUDA toolkit in DIR (default: /usr/local/cuda
#                     when its nvcc exists; --without-cuda disables it).
# Checks that nvcc compiles and links a kernel and that cuRAND links with the
# host compiler. Defines ADAPT_HAVE_CUDA, substitutes NVCC, NVCCFLAGS,
# CUDA_CFLAGS, CUDA_LIBS and sets AM_CONDITIONAL HAVE_CUDA.
# --with-cudnn[=DIR]  cuDNN's include/ and lib/ (or lib64/) in DIR (default: the
#                     toolkit's); when it is absent (or --without-cudnn) the
#                     GPU convolutions use im2col and cuBLAS. Defines
#                     ADAPT_HAVE_CUDNN and adds cuDNN to CUDA_CFLAGS/CUDA_LIBS.
# NVCC_GENCODE overrides the target architectures.
AC_DEFUN([ADAPT_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
       [build the CUDA kernels with the toolkit in DIR (default: /usr/local/cuda if present)])],
    [], [with_cuda=check])
  AC_ARG_WITH([cudnn],
    [AS_HELP_STRING([--with-cudnn@<:@=DIR@:>@],
       [cuDNN for the GPU convolutions, from DIR (default: the CUDA toolkit's, if present)])],
    [], [with_cudnn=check])
  AC_ARG_VAR([NVCC_GENCODE],
     [nvcc -gencode flags (default: sm_80 and sm_90 code plus compute_90 PTX)])
  adapt_have_cuda=no
  cuda_dir=""
  AS_CASE([$with_cuda],
    [no], [],
    [yes|check], [cuda_dir=/usr/local/cuda],
    [cuda_dir=$with_cuda])
  AS_IF([test -n "$cuda_dir"], [
    AC_PATH_PROG([NVCC], [nvcc], [no], [$cuda_dir/bin])
    AS_IF([test "x$NVCC" = xno], [
      AS_IF([test "x$with_cuda" != xcheck], [AC_MSG_ERROR([nvcc not found in $cuda_dir/bin])])
    ], [
      gencode_default="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
      gencode_default="$gencode_default -gencode arch=compute_90,code=compute_90"
      : ${NVCC_GENCODE="$gencode_default"}
      NVCCFLAGS="-O3 -std=c++17 $NVCC_GENCODE"
      AC_MSG_CHECKING([whether nvcc compiles a kernel])
      cat > conftest.cu <<_ACEOF
#include <curand_kernel.h>
__global__ void k(float *x)
{
    curandStatePhilox4_32_10_t s;
    curand_init(1, threadIdx.x, 0, &s);
    *x = curand_uniform(&s);
}
int main(void) { float *d = 0; k<<<1, 1>>>(d); return 0; }
_ACEOF
      AS_IF([$NVCC $NVCCFLAGS -c conftest.cu -o conftest.o >&AS_MESSAGE_LOG_FD 2>&1], [
        AC_MSG_RESULT([yes])
        cuda_libdir=$cuda_dir/lib64
        test -d "$cuda_libdir" || cuda_libdir=$cuda_dir/lib
        CUDA_CFLAGS="-I$cuda_dir/include"
        CUDA_LIBS="-L$cuda_libdir -Wl,-rpath,$cuda_libdir"
        CUDA_LIBS="$CUDA_LIBS -lcurand -lcublas -lcublasLt -lcudart -lstdc++"
        AC_MSG_CHECKING([for cuRAND and cuBLAS])
        save_LIBS=$LIBS
        save_CFLAGS=$CFLAGS
        LIBS="$CUDA_LIBS $LIBS"
        CFLAGS="$CFLAGS $CUDA_CFLAGS"
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <curand.h>
#include <cublas_v2.h>]],
            [[curandGenerator_t g; cublasHandle_t h;
               return (int)curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10) +
                      (int)cublasCreate(&h);]])],
          [AC_MSG_RESULT([yes]); adapt_have_cuda=yes],
          [AC_MSG_RESULT([no])])
        LIBS=$save_LIBS
        CFLAGS=$save_CFLAGS
      ], [AC_MSG_RESULT([no])])
      rm -f conftest.cu conftest.o
      AS_IF([test "x$adapt_have_cuda" = xno && test "x$with_cuda" != xcheck],
            [AC_MSG_ERROR(
               [the CUDA toolkit in $cuda_dir cannot build the kernels (see config.log)])])
    ])
  ])
  adapt_have_cudnn=no
  AS_IF([test "x$adapt_have_cuda" = xyes && test "x$with_cudnn" != xno], [
    cudnn_dir=$cuda_dir
    AS_CASE([$with_cudnn], [yes|check], [], [cudnn_dir=$with_cudnn])
    cudnn_libdir=$cudnn_dir/lib64
    test -d "$cudnn_libdir" || cudnn_libdir=$cudnn_dir/lib
    AC_MSG_CHECKING([for cuDNN in $cudnn_dir])
    save_LIBS=$LIBS
    save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS $CUDA_CFLAGS -I$cudnn_dir/include"
    # a pip-installed cuDNN ships libcudnn.so.9 without the libcudnn.so link
    for cudnn_l in -lcudnn -l:libcudnn.so.9; do
      LIBS="-L$cudnn_libdir -Wl,-rpath,$cudnn_libdir $cudnn_l $CUDA_LIBS $save_LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cudnn.h>]],
          [[cudnnHandle_t h; return (int)cudnnCreate(&h) + (int)cudnnGetVersion();]])],
        [adapt_have_cudnn=yes; break])
    done
    LIBS=$save_LIBS
    CFLAGS=$save_CFLAGS
    AC_MSG_RESULT([$adapt_have_cudnn])
    AS_IF([test "x$adapt_have_cudnn" = xyes], [
      CUDA_CFLAGS="$CUDA_CFLAGS -I$cudnn_dir/include"
      CUDA_LIBS="-L$cudnn_libdir -Wl,-rpath,$cudnn_libdir $cudnn_l $CUDA_LIBS"
      AC_DEFINE([ADAPT_HAVE_CUDNN], [1],
                [Define to 1 when the GPU convolutions, pooling and batch-norm may use cuDNN])
      AC_DEFINE_UNQUOTED([ADAPT_CUDNN_DIR], ["$cudnn_dir"],
                [The folder of the cuDNN the build links (include/ and lib/ or lib64/)])
    ], [AS_IF([test "x$with_cudnn" != xcheck],
                [AC_MSG_ERROR([cuDNN not usable in $cudnn_dir (see config.log)])])])
  ])
  AS_IF([test "x$adapt_have_cuda" = xyes],
        [AC_DEFINE([ADAPT_HAVE_CUDA], [1], [Define to 1 when the CUDA kernels are built])],
        [CUDA_CFLAGS=""; CUDA_LIBS=""])
  AC_SUBST([NVCC])
  AC_SUBST([NVCCFLAGS])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LIBS])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$adapt_have_cuda" = xyes])
])
