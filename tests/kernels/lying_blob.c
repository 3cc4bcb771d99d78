/*
 * A library whose symbol table lies: it says __tvm_dev_mblob is 64 MiB over the 52
 * bytes it holds, and those bytes say a 60 MB graph JSON follows. Its __tvm_main__
 * is four bytes with no terminating NUL. Reading either as the symbol table says
 * reads far past what the library maps.
 */

#define LB_EXPORT __attribute__((visibility("default")))

__asm__(
    ".globl __tvm_dev_mblob\n"
    ".pushsection .rodata\n"
    ".balign 8\n"
    ".type __tvm_dev_mblob, @object\n"
    ".size __tvm_dev_mblob, 67108864\n"
    "__tvm_dev_mblob:\n"
    /* payload length: 64 MiB - 8 */
    ".quad 67108856\n"
    /* one module */
    ".quad 1\n"
    /* its type key */
    ".quad 20\n"
    ".ascii \"GraphExecutorFactory\"\n"
    /* a graph JSON of 60,000,000 bytes, none of them here */
    ".quad 60000000\n"
    ".popsection\n");

LB_EXPORT const char __tvm_main__[4] = {'a', 'b', 'c', 'd'};
