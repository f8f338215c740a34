package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// pricingProduct is the part of one Pricing API PriceList entry (a JSON
// document per product) that carries an on-demand hourly price.
type pricingProduct struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// onDemandPricesFromAPI reads the on-demand Linux price of every instance
// type in region from the Pricing API (GetProducts, all pages).
func onDemandPricesFromAPI(ctx context.Context, api PricingAPI, region string) (map[string]float64, error) {
	filter := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	input := &pricing.GetProductsInput{
		ServiceCode:   aws.String("AmazonEC2"),
		FormatVersion: aws.String("aws_v1"),
		Filters: []pricingtypes.Filter{
			filter("regionCode", region),
			filter("productFamily", "Compute Instance"),
			filter("operatingSystem", "Linux"),
			filter("tenancy", "Shared"),
			filter("preInstalledSw", "NA"),
			filter("capacitystatus", "Used"),
			filter("licenseModel", "No License required"),
		},
	}
	prices := map[string]float64{}
	pages := pricing.NewGetProductsPaginator(api, input)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("pricing GetProducts for %s: %w", region, err)
		}
		for i, doc := range page.PriceList {
			name, price, ok, err := parsePricingProduct(doc)
			if err != nil {
				return nil, fmt.Errorf("pricing GetProducts for %s: PriceList[%d]: %w", region, i, err)
			}
			if ok {
				prices[name] = price
			}
		}
	}
	if len(prices) == 0 {
		return nil, fmt.Errorf("pricing GetProducts for %s returned no on-demand prices", region)
	}
	return prices, nil
}

// parsePricingProduct returns the instance type and its hourly USD price;
// ok is false for a product without a positive hourly price (e.g. a retired
// type priced at zero).
func parsePricingProduct(doc string) (instanceType string, price float64, ok bool, err error) {
	var p pricingProduct
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return "", 0, false, fmt.Errorf("decoding product: %w", err)
	}
	instanceType = p.Product.Attributes.InstanceType
	if instanceType == "" {
		return "", 0, false, nil
	}
	for _, term := range p.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			usd, has := dim.PricePerUnit["USD"]
			if !has || (dim.Unit != "Hrs" && dim.Unit != "Hours") {
				continue
			}
			v, err := strconv.ParseFloat(usd, 64)
			if err != nil {
				return "", 0, false, fmt.Errorf("product %s: price %q: %w", instanceType, usd, err)
			}
			if v > 0 {
				return instanceType, v, true, nil
			}
		}
	}
	return instanceType, 0, false, nil
}
