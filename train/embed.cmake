# Writes a C file holding a file's bytes (cmake -P, at build time):
#   cmake -DIN=FILE -DOUT=FILE.c -DNAME=sym -P embed.cmake
# gives `const unsigned char sym[]` (the bytes and a NUL) and
# `const size_t sym_len` (the bytes, the NUL not counted), both visible to
# the library's other files (train/page.c serves them).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from ${IN} by train/embed.cmake: do not edit. */\n"
                  "#include <stddef.h>\n"
                  "extern const unsigned char ${NAME}[];\nextern const size_t ${NAME}_len;\n"
                  "const unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
                  "const size_t ${NAME}_len = ${len};\n")
