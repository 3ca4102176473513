// A fixture for the format check's own test: this is not what clang-format makes of it.
int  add( int a,int b ){return a+b;}
