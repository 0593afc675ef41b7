/* A library built without a symbol table (-Wl,-s: .dynsym only) and with
 * no debug file anywhere: helper_impl, a static function, has no name a
 * reader can find (tests/e2e/test_names.py: what to install). */
static __attribute__((noinline)) int helper_impl(int x)
{
	return x * 3 + 1;
}

int lib_entry(int x)
{
	return helper_impl(x) + 2;
}
