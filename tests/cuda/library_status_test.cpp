// How cuBLAS and cuDNN statuses are classified (src/backend/cuda/library_status.h): by code,
// so an allocation failure is out_of_memory whatever the library's text says. Runs in every
// build; the values are checked against the libraries' headers where those are compiled.
#include <gtest/gtest.h>

#include "backend/cuda/library_status.h"

namespace tandem::cuda_detail {
namespace {

TEST(LibraryStatus, CudnnRejectionsAreTheNotSupportedCategoryAndSizeInsufficient) {
  for (int s = 3000; s <= 3014; ++s) EXPECT_TRUE(cudnn_rejects_algorithm(s)) << s;
  EXPECT_TRUE(cudnn_rejects_algorithm(3999));  // a sub-code a later cuDNN may add
  EXPECT_TRUE(cudnn_rejects_algorithm(2006));  // BAD_PARAM_SIZE_INSUFFICIENT
  for (int s : {0, 1001, 2000, 2002, 2005, 2007, 2008, 4000, 4003, 4004, 5000})
    EXPECT_FALSE(cudnn_rejects_algorithm(s)) << s;
}

TEST(LibraryStatus, OutOfMemoryByCode) {
  EXPECT_EQ(cublas_error_code(3), ErrorCode::out_of_memory);   // CUBLAS_STATUS_ALLOC_FAILED
  EXPECT_EQ(cudnn_error_code(4003), ErrorCode::out_of_memory);  // host allocation failed
  EXPECT_EQ(cudnn_error_code(4004), ErrorCode::out_of_memory);  // device allocation failed
  for (int s : {7, 11, 13, 14, 15, 16}) EXPECT_EQ(cublas_error_code(s), ErrorCode::internal) << s;
  for (int s : {2000, 3000, 3002, 4000, 4001, 5000}) EXPECT_EQ(cudnn_error_code(s), ErrorCode::internal) << s;
}

TEST(LibraryStatus, LibrariesThatCannotRunHereAreNotAvailable) {
  EXPECT_EQ(cublas_error_code(1), ErrorCode::not_available);  // NOT_INITIALIZED
  EXPECT_EQ(cublas_error_code(8), ErrorCode::not_available);  // ARCH_MISMATCH
  for (int s : {1002, 1008, 3005, 3006, 3007, 3009}) EXPECT_EQ(cudnn_error_code(s), ErrorCode::not_available) << s;
}

}  // namespace
}  // namespace tandem::cuda_detail
