// Stubs so llama.cpp's src/llama-grammar.cpp links alone (reference for the differential check).
#include "llama-vocab.h"
#include "llama-impl.h"
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
std::vector<std::string> g_pieces;
int32_t g_eog = -1;
struct llama_vocab::impl {};
llama_vocab::llama_vocab() {}
llama_vocab::~llama_vocab() {}
bool llama_vocab::is_eog(llama_token id) const { return id == g_eog; }
const std::string & llama_vocab::token_to_piece(llama_token t) const { return g_pieces[size_t(t)]; }
int32_t llama_vocab::tokenize(const char *, int32_t, llama_token *, int32_t, bool, bool) const { return -1; }
void llama_log_internal(ggml_log_level, const char *, ...) {}
extern "C" void ggml_abort(const char * file, int line, const char *, ...) { fprintf(stderr, "ggml_abort %s:%d\n", file, line); abort(); }
