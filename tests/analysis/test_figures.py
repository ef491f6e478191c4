from analysis import figures


def test_the_palette_gives_each_variant_one_colour_whatever_the_order_it_is_met_in():
    first = figures.palette(["local_w4", "dense", "local_w4", "sparse_strided"])
    second = figures.palette(["sparse_strided", "dense", "local_w4"])
    assert first == second
    assert len(set(first.values())) == 3
    many = figures.palette([f"variant{index}" for index in range(14)])
    assert len(set(many.values())) == 14

