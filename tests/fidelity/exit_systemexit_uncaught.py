def main():
    try:
        raise SystemExit(7)
    finally:
        print("finally runs")


main()
