"""Prints the top cumulative and own-time functions of the newest referee profiles (ADAEXPLORE_PROFILE_DIR)."""
import pstats, sys, glob, os
files = sorted(glob.glob(sys.argv[1] + "/*.prof"), key=os.path.getmtime)
for f in files[-2:]:
    print("=====", f)
    st = pstats.Stats(f); st.sort_stats("cumulative").print_stats(45)
    st.sort_stats("tottime").print_stats(25)
